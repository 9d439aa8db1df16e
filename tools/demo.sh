#!/usr/bin/env bash
# The main job, on the stand-ins (build/standin/neuronx-cc stands in for the
# Neuron compiler, build/standin/standin_train for a training script on
# current torch-neuronx, which reads and writes the cache itself and takes
# model.hlo_module.pb.lock while it compiles; see tools/standin/README.md):
#   1. the training run as it is today: every graph compiled just in time;
#   2. neuron_parallel_compile over a short trial of the same script, on an
#      empty cache;
#   3. the training run again: it finds every graph compiled;
#   4. a run the trial did not cover (longer: it reaches a graph at step 25,
#      and its dataset ends with a partial batch of 3 rows): the gate
#      (--command check) says so before it, `neuron_cache misses` after it,
#      each graph with the trial's nearest and what differs.
# Step 2 writes its timeline (--trace); NPC_DEMO_TRACE=FILE keeps a copy of
# it (tools/trace-picture.sh draws docs/images/demo-trace.png from it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
root=$(pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/npc-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PATH="$root/build/bin:$root/build/standin:$PATH"
export NEURON_CC="$root/build/standin/neuronx-cc"
# A compile of the stand-in takes 1 s plus 1 s per 200 kB of graph, in sleep
# mode so the demo behaves the same on any machine.
export STANDIN_CC_MODE=sleep STANDIN_CC_BASE_MS=1000 STANDIN_CC_BYTES_PER_SEC=200000
train=(standin_train --protocol torch-neuronx --nproc_per_node 2 --layers 8 --hidden 512 --graphs_per_step 4 --eval_every 5)

elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
jit() { grep -o 'total: .*' "$1" | sed -n 's/.*jit_compiles=\([0-9]*\).*/\1/p'; }

echo "== 1. training run with just-in-time compilation (empty cache)"
export NEURON_CC_FLAGS="--cache_dir=$work/jit-cache"
start=$(date +%s.%N)
"${train[@]}" --steps_this_run 20 > "$work/jit.log" 2>&1
jit_time=$(elapsed "$start")
grep 'total:' "$work/jit.log"

echo
echo "== 2. neuron_parallel_compile over a 10-step trial (empty cache)"
export NEURON_CC_FLAGS="--cache_dir=$work/cache"
start=$(date +%s.%N)
# The stand-in compiler holds little memory: plan 2 GiB per compile, not the
# real compiler's 64 GiB the launcher assumes with nothing learned.
neuron_parallel_compile --memory-per-compile 2GiB --parallel_compile_workdir "$work/workdir" --report "$work/report.json" \
  --trace "$work/trace.json" \
  "${train[@]}" --steps_this_run 10 > "$work/precompile.log" 2>&1 || { cat "$work/precompile.log"; exit 1; }
pre_time=$(elapsed "$start")
grep -E 'neuron_parallel_compile: ([0-9]+ graphs found|wall time|slowest compiles| +[0-9.ms]+s +[0-9]+%)' "$work/precompile.log"
if [ -n "${NPC_DEMO_TRACE:-}" ]; then
  cp "$work/trace.json" "$NPC_DEMO_TRACE"
  echo "(its timeline: $NPC_DEMO_TRACE; open it in https://ui.perfetto.dev)"
fi

echo
echo "== 3. the same training run, now on the pre-compiled cache"
start=$(date +%s.%N)
"${train[@]}" --steps_this_run 20 > "$work/warm.log" 2>&1
warm_time=$(elapsed "$start")
grep 'total:' "$work/warm.log"

echo
echo "== 4. a longer run than the trial covered (a graph at step 25, a last batch of 3 rows)"
longer=("${train[@]}" --steps_this_run 30 --late_graph_step 25 --last_batch 3)
echo "\$ neuron_parallel_compile --command check ... --steps_this_run 30 --last_batch 3"
status=0
neuron_parallel_compile --command check --parallel_compile_workdir "$work/workdir" "${longer[@]}" \
  > "$work/check.log" 2>&1 || status=$?
grep -E 'graph\(s\) the trial ran|^  neuronxcc-' "$work/check.log"
echo "(exit status $status: the graphs the run would compile)"
"${longer[@]}" > "$work/longer.log" 2>&1
grep 'total:' "$work/longer.log"
echo "\$ neuron_cache misses"
neuron_cache misses

echo
printf '%-48s %12s %10s\n' "run" "JIT compiles" "seconds"
printf '%-48s %12s %10s\n' "training, just in time" "$(jit "$work/jit.log")" "$jit_time"
printf '%-48s %12s %10s\n' "neuron_parallel_compile (trial + parallel compile)" "-" "$pre_time"
printf '%-48s %12s %10s\n' "training after neuron_parallel_compile" "$(jit "$work/warm.log")" "$warm_time"
