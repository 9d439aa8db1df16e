#!/usr/bin/env bash
# The checks CI runs after the test suite:
#
#   deb   the .deb of the normal build directory (cpack -G DEB), which
#         lintian must pass without errors or warnings (about a minute)
#   asan  the whole suite built with AddressSanitizer + UBSan (preset asan)
#   tsan  the whole suite built with ThreadSanitizer (preset tsan)
#   fuzz  the whole tree built with clang -Wall -Wextra -Werror and the
#         libFuzzer targets, each run for a short time (tests/fuzz/run.sh)
#
#   tools/ci-checks.sh              all four, in that order
#   tools/ci-checks.sh asan fuzz    some of them
#
# asan, tsan and fuzz are each a full build on a 2-core machine (about 10 to
# 15 minutes) plus its run. CI gives the whole job a time budget:
# NPC_CI_DEADLINE (seconds since the epoch) is when everything must be over.
# A check whose usual length (NPC_CHECK_MINUTES_<NAME>, defaults below)
# would end after it is skipped, and one still running at the deadline is
# stopped; both say so loudly and do not fail the job, since they say nothing
# about the code. A check that finds a problem fails the job. Without NPC_CI_DEADLINE there is no budget.
#
# Exit status: 0 when every check that ran passed, 1 otherwise, 2 for usage.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A minutes=([deb]=${NPC_CHECK_MINUTES_DEB:-2}
                    [asan]=${NPC_CHECK_MINUTES_ASAN:-30} [tsan]=${NPC_CHECK_MINUTES_TSAN:-30}
                    [fuzz]=${NPC_CHECK_MINUTES_FUZZ:-15})
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(deb asan tsan fuzz)
for c in "${checks[@]}"; do
  [ -n "${minutes[$c]+set}" ] || { echo "ci-checks: unknown check '$c' (deb, asan, tsan or fuzz)" >&2; exit 2; }
done

jobs=$(nproc)
run_deb() {
  # The build tools/test.sh made; only what the package holds is brought up
  # to date, and the package goes to a temp dir, not into the build.
  local build=${BUILD_DIR:-build}
  out=$(mktemp -d) # not local: the EXIT trap runs after the function returns
  trap 'rm -rf "$out"' EXIT
  cmake --build "$build" --target neuron_parallel_compile neuron_cache neuron_cc_wrapper \
    npc_program_docs npc_debian_docs
  (cd "$build" && cpack -G DEB -B "$out" >/dev/null)
  lintian --fail-on error,warning "$out"/*.deb
}
run_asan() {
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ctest --preset asan -j"$jobs"
}
run_tsan() {
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan
  ctest --preset tsan -j"$jobs"
}
run_fuzz() {
  # run.sh configures and builds the fuzz preset (clang, -Werror, every
  # target) and runs each fuzzer for the given seconds.
  bash tests/fuzz/run.sh "${NPC_FUZZ_SECONDS:-10}"
}

status=0
summary=()
for c in "${checks[@]}"; do
  limit=()
  if [ -n "${NPC_CI_DEADLINE:-}" ]; then
    left=$(( NPC_CI_DEADLINE - $(date +%s) ))
    if [ "$left" -lt $(( minutes[$c] * 60 )) ]; then
      echo "ci-checks: SKIPPED $c: it usually takes ${minutes[$c]} min and the CI budget has $((left / 60)) min left" >&2
      summary+=("$c: SKIPPED (budget)")
      continue
    fi
    limit=(timeout --kill-after=30 "$left")
  fi
  echo "ci-checks: === $c ===" >&2
  began=$(date +%s)
  set +e
  "${limit[@]}" bash -c "$(declare -f "run_$c"); jobs=$jobs; set -euo pipefail; run_$c"
  rc=$?
  set -e
  took=$(( $(date +%s) - began ))
  if [ "$rc" -eq 0 ]; then
    summary+=("$c: passed in $((took / 60)) min $((took % 60)) s")
  elif [ "${#limit[@]}" -gt 0 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
    echo "ci-checks: STOPPED $c at the CI budget after $((took / 60)) min" >&2
    summary+=("$c: STOPPED at the budget after $((took / 60)) min")
  else
    summary+=("$c: FAILED (exit $rc) after $((took / 60)) min $((took % 60)) s")
    status=1
  fi
done
echo "ci-checks: summary" >&2
for line in "${summary[@]}"; do echo "  $line" >&2; done
exit $status
