#!/usr/bin/env bash
# Regenerates the table rows of docs/bad-inputs.md from what the programs
# print today: runs every bad-input test and writes each row as observed.
#   tests/reliability/bad_inputs_doc.sh [build dir]   # prints the rows
set -euo pipefail
build=${1:-build}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
NPC_BAD_INPUTS_DOC=$rows "$build/bin/reliability_tests" --gtest_filter='Table/BadInputTest.*' > /dev/null
echo '| Row (test `Table/BadInputTest.ExactMessageAndExitCode/<row>`) | Bad input | Command (environment first) | Exit | Message (stderr unless marked) |'
echo '| --- | --- | --- | --- | --- |'
cat "$rows"
