#!/usr/bin/env bash
# The checks CI runs after the test suite (tools/test.sh, whose install tests
# already build the .deb and run lintian on it):
#
#   asan  every target built with clang -Wall -Wextra -Werror, ASan + UBSan
#         and the libFuzzer targets (preset asan); the whole suite run on it,
#         and each fuzzer for NPC_FUZZ_SECONDS (default 10)
#   tsan  the whole suite built with clang and ThreadSanitizer (preset tsan)
#   release  the portable release built in a Debian 11 root (tools/release.sh)
#         and tried in a minimal one (tools/release-test.sh)
#
#   tools/ci-checks.sh              all three, in that order
#   tools/ci-checks.sh tsan         one of them
#
# Each is a build of its own (asan 9.5 to 11.5 minutes, tsan 5.5, release 3.5
# with its roots made, on 2 cores
# from a fresh clone) and a run of the suite; docs/testing.md has the
# measured times. CI gives the whole job a time budget: NPC_CI_DEADLINE
# (seconds since the epoch) is when everything must be over. A check still running then is stopped, and one
# that could not start before it is not run: both fail the job, as a check
# that finds a problem does, since an unchecked change must not land.
#
# Exit status: 0 when every check ran and passed, 1 otherwise, 2 for usage.
set -euo pipefail
cd "$(dirname "$0")/.."

checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(asan tsan release)
for c in "${checks[@]}"; do
  case $c in
    asan | tsan | release) ;;
    *) echo "ci-checks: unknown check '$c' (asan, tsan or release)" >&2; exit 2 ;;
  esac
done

jobs=$(nproc)
run_asan() {
  # clang, its sanitizer and libFuzzer runtimes and lld, from Debian.
  bash tools/setup.sh --install-only --clang
  cmake --preset asan -DNPC_FUZZ_SECONDS="${NPC_FUZZ_SECONDS:-10}" >/dev/null
  cmake --build --preset asan
  ctest --preset asan -j"$jobs"
}
run_tsan() {
  bash tools/setup.sh --install-only --clang
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan
  ctest --preset tsan -j"$jobs"
}
run_release() {
  JOBS=$jobs bash tools/release.sh
  bash tools/release-test.sh
}

status=0
summary=()
for c in "${checks[@]}"; do
  limit=()
  if [ -n "${NPC_CI_DEADLINE:-}" ]; then
    left=$(( NPC_CI_DEADLINE - $(date +%s) ))
    if [ "$left" -le 0 ]; then
      echo "ci-checks: NOT RUN $c: the CI budget is spent" >&2
      summary+=("$c: NOT RUN (budget spent): FAILED")
      status=1
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
    summary+=("$c: STOPPED at the budget after $((took / 60)) min: FAILED")
    status=1
  else
    summary+=("$c: FAILED (exit $rc) after $((took / 60)) min $((took % 60)) s")
    status=1
  fi
done
echo "ci-checks: summary" >&2
for line in "${summary[@]}"; do echo "  $line" >&2; done
exit $status
