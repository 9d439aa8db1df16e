#!/usr/bin/env bash
# Draws docs/images/demo-trace.png from a real run: the demo (tools/demo.sh,
# on the stand-ins) with its pre-compile's --trace kept, then
# tools/trace_picture.py over that trace. Also keeps the trace itself as
# docs/images/demo-trace.json, to open in Perfetto.
#
#   bash tools/trace-picture.sh
set -euo pipefail
cd "$(dirname "$0")/.."
NPC_DEMO_TRACE="$PWD/docs/images/demo-trace.json" bash tools/demo.sh
python3 tools/trace_picture.py docs/images/demo-trace.json docs/images/demo-trace.png
echo "trace-picture: wrote docs/images/demo-trace.png"
