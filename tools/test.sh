#!/usr/bin/env bash
# Builds (installing what is missing) and runs the whole test suite.
# The reliability suites run in their short form; NPC_LONG=1 makes them long
# (see docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
