#!/usr/bin/env bash
# Builds (installing what is missing) and runs the whole test suite.
# The long forms of the reliability suites are not part of it: see
# docs/reliability.md for the command that runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" -LE 'long' "$@"
