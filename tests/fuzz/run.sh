#!/usr/bin/env bash
# Builds the whole tree with clang -Wall -Wextra -Werror and the libFuzzer
# targets (the `asan` preset: ASan + UBSan, the build CI runs the suite on),
# then runs each target for SECONDS (default 10), from its seed corpus in
# tests/fuzz/corpus/<target>/ plus a working corpus in build-asan/ that grows
# from run to run. Prints the executions per target and in all.
#
#   tests/fuzz/run.sh          # 10 s per target, as CI runs them (in ctest)
#   tests/fuzz/run.sh 600      # the long run: 10 min per target
#
# A crash stops that target and leaves its input as
# build-asan/tests/fuzz/crash-<target>-<hash>. Copy it to
# tests/fuzz/regressions/<target>/ so the default suite (fuzz_regression_tests)
# replays it from then on, then fix the bug. Exit status: 0 when no target
# crashed, 1 otherwise.
set -euo pipefail

seconds=${1:-10}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-asan
targets=(shell_words neuron_cc_flags compile_flags entry_meta usage_shard lock_record trial_line cache_key bundle_manifest)

cd "$src"
# clang and its libFuzzer runtime, installed from Debian's packages if missing.
bash tools/setup.sh --install-only --clang
mkdir -p "$build"
cmake --preset asan > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 2; }
cmake --build --preset asan

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
total=0
for target in "${targets[@]}"; do
  work=$build/tests/fuzz/corpus/$target
  log=$build/tests/fuzz/$target.log
  mkdir -p "$work"
  if "$build/bin/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 \
       -artifact_prefix="$build/tests/fuzz/crash-$target-" \
       "$work" "$src/tests/fuzz/corpus/$target" > "$log" 2>&1; then
    result=ok
  else
    result="CRASH (see $log; input in $build/tests/fuzz/crash-$target-*)"
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  runs=${runs:-0}
  total=$((total + runs))
  corpus=$(find "$work" -type f | wc -l)
  printf '%-16s %12s executions in %ss, corpus %s: %s\n' "$target" "$runs" "$seconds" "$corpus" "$result"
done
printf 'all targets      %12s executions\n' "$total"
exit $status
