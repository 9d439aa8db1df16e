#!/usr/bin/env bash
# Runs the benchmarks and writes docs/performance.md (tables) and
# docs/performance.json (every raw figure). Builds what it needs first.
#
#   bench/run.sh                       every scenario, 5 runs each
#   bench/run.sh --only memory,hashing some scenarios (the others are kept
#                                      from the existing docs/performance.json)
#   bench/run.sh --runs 7              more repetitions
#   bench/run.sh --quick               small workloads, to try the harness out;
#                                      writes build/bench/quick-performance.*
#
# Environment: BUILD_DIR (default: build); NPC_BENCH_SCRATCH (scratch space,
# about 3 GB of small files at the peak, removed at exit; default /dev/shm
# when it is a big enough tmpfs, else TMPDIR or /tmp); NPC_BENCH_BEFORE (the
# revision the before-after scenario compares with, default 2f19d6f: the tree
# before the cache was rebuilt over one storage interface; built once into
# BUILD_DIR/bench-before-REV from `git archive`).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; }

driver_args=()
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; driver_args+=(--quick) ;;
    --only|--runs)
      [ $# -ge 2 ] || { echo "bench/run.sh: $1 needs a value" >&2; exit 2; }
      driver_args+=("$1" "$2"); shift ;;
    --only=*|--runs=*) driver_args+=("${1%%=*}" "${1#*=}") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$quick" = 1 ]; then
  out_json=$build/bench/quick-performance.json
  out_md=$build/bench/quick-performance.md
else
  out_json=$root/docs/performance.json
  out_md=$root/docs/performance.md
fi

now() { date +%s.%N; }
build_start=$(now)
if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}"
else
  cmake -S "$root" -B "$build" >/dev/null
fi
cmake --build "$build" --target npc_bench neuron_parallel_compile neuron_cc_wrapper neuron_cache \
  standin_neuronx_cc standin_train
build_seconds=$(awk -v a="$build_start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')

# The before-after scenario runs the programs of an older revision beside
# ours: build them (once per revision) from the repository's own history.
before_args=()
wants_before=1
for ((i = 0; i < ${#driver_args[@]}; i++)); do
  if [ "${driver_args[$i]}" = --only ]; then
    case ",${driver_args[$((i + 1))]}," in *,before-after,*) ;; *) wants_before=0 ;; esac
  fi
done
if [ "$wants_before" = 1 ]; then
  before_rev=${NPC_BENCH_BEFORE:-2f19d6f}
  before_sha=$(git -C "$root" rev-parse --verify --short "$before_rev^{commit}" 2>/dev/null) || {
    echo "bench/run.sh: the before-after scenario needs revision '$before_rev' (NPC_BENCH_BEFORE) in this repository's history: fetch it, or leave the scenario out with --only" >&2
    exit 2
  }
  before_root=$build/bench-before-$before_sha
  if [ ! -f "$before_root/build/CMakeCache.txt" ]; then
    rm -rf "$before_root"
    mkdir -p "$before_root/src"
    git -C "$root" archive "$before_sha" | tar -x -C "$before_root/src"
    generator=()
    command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
    cmake -S "$before_root/src" -B "$before_root/build" "${generator[@]}" >/dev/null
  fi
  cmake --build "$before_root/build" --target neuron_parallel_compile neuron_cc_wrapper neuron_cache
  before_args=(--before-build "$before_root/build" --before-revision "$before_sha")
fi

revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  revision="$revision + uncommitted changes"
fi

# Scratch space: $NPC_BENCH_SCRATCH, else /dev/shm when it is a tmpfs with 4 GiB
# free (the cache-at-scale scenario writes and deletes ~600,000 small files,
# which on a disk mounted with online discard costs milliseconds per file),
# else $TMPDIR or /tmp. The report records which and what a file costs there.
scratch_parent=${NPC_BENCH_SCRATCH:-}
if [ -z "$scratch_parent" ]; then
  scratch_parent=${TMPDIR:-/tmp}
  if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
    free_kib=$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')
    [ "${free_kib:-0}" -ge $((4 * 1024 * 1024)) ] && scratch_parent=/dev/shm
  fi
fi
scratch=$(mktemp -d "$scratch_parent/npc-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$(dirname "$out_json")" "$(dirname "$out_md")"

shown="bench/run.sh"
[ ${#driver_args[@]} -gt 0 ] && shown="$shown ${driver_args[*]}"
"$build/bench/npc_bench" --build-dir "$build" --scratch "$scratch" \
  --json "$out_json" --md "$out_md" --build-seconds "$build_seconds" \
  --revision "$revision" --command-line "$shown" "${before_args[@]}" "${driver_args[@]}"
echo "bench/run.sh: wrote $out_md and $out_json"
