// Scenario 10b: a small cluster over short graphs, where S3's own work on
// each compile's path weighs most. 6 hosts × 2 compile slots pre-compile 48
// graphs of 2 to 6 s on one cache, a directory and then an s3:// prefix on
// the RADOS Gateway, each against the oracle's split on the same cache and
// against the cluster bound. The hosts are simulated as in scenario 10
// (cluster_rig.hpp).

#include <algorithm>
#include <unistd.h>

#include "cluster_rig.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

WorkloadSpec short_graphs_spec(bool quick) {
  WorkloadSpec spec;
  spec.name = "cluster-short";
  spec.seed = 20261129;
  spec.small_count = quick ? 24 : 48;
  spec.small_median_ms = quick ? 800 : 4000;
  spec.small_sigma = 0.35;
  spec.small_min_ms = quick ? 400 : 2000;
  spec.small_max_ms = quick ? 1200 : 6000;
  spec.bytes_per_ms = 20;
  return spec;
}

// Each run's makespan over the run of the same round of `baseline`: both
// met the machine in the same state.
std::vector<double> to_baseline(std::vector<json>& records, const std::vector<json>& baseline, const char* field) {
  std::vector<double> ratios;
  for (std::size_t r = 0; r < records.size() && r < baseline.size(); ++r) {
    records[r][field] = records[r]["wall_seconds"].get<double>() / baseline[r]["wall_seconds"].get<double>();
    ratios.push_back(records[r][field].get<double>());
  }
  return ratios;
}

} // namespace

Scenario run_cluster_short(const Context& context) {
  Scenario s;
  s.id = "cluster-short";
  s.title = "10b. A small cluster over short graphs: 6 hosts × 2 on one cache";
  s.reproduce = "bench/run.sh --only cluster-short";
  const ClusterShape shape{6, 2};
  ClusterRig rig(context, s.id, generate(short_graphs_spec(context.options.quick)), shape);
  const std::size_t total = rig.total();
  const double bound = rig.bound(shape.hosts);
  log(context, s.id + ": " + std::to_string(total) + " graphs, sum " + num(rig.sum(), 1) + " s, cluster bound " +
                   num(bound) + " s");

  std::vector<Contender> contenders = {rig.ours_on_directory(), rig.ours_on_s3(),
                                      rig.oracle_on_directory(shape.hosts), rig.oracle_on_s3()};
  auto records = alternate(context, s.id, contenders, 0, Settle::no);
  std::vector<json>& ours_directory = records[0];
  std::vector<json>& ours_s3 = records[1];
  std::vector<json>& oracle_directory = records[2];
  std::vector<json>& oracle_s3 = records[3];
  std::string incomplete;
  const char* names[] = {"ours-directory", "ours-s3", "oracle-directory", "oracle-s3"};
  for (std::size_t c = 0; c < records.size(); ++c)
    for (auto& r : records[c]) {
      r["ratio_to_bound"] = r["wall_seconds"].get<double>() / bound;
      if (!r.value("complete", false)) incomplete += std::string(" ") + names[c] + "#" + std::to_string(r.value("run", 0));
    }
  // A ratio from a run that did not compile every graph once means nothing.
  if (!incomplete.empty())
    throw std::runtime_error("some runs did not compile every graph exactly once (" + incomplete.substr(1) +
                             "); look with `npc_bench --keep --only cluster-short`");

  const std::string cluster = "ours, 6 hosts × 2 workers";
  auto ratios = [](const std::vector<json>& r) { return column(r, "ratio_to_bound"); };
  auto walls = [](const std::vector<json>& r) { return column(r, "wall_seconds"); };
  {
    auto s3_to_bound = ratios(ours_s3);
    s.rows.push_back({cluster + ", one s3:// cache (RADOS Gateway)", "makespan / cluster bound", "x", s3_to_bound,
                      "≤ 1.15", spread(s3_to_bound).median <= 1.15, "", 3});
    auto s3_to_s3_oracle = to_baseline(ours_s3, oracle_s3, "to_s3_oracle");
    s.rows.push_back({cluster + ", one s3:// cache (RADOS Gateway)",
                      "makespan / the oracle's split's on the same S3 cache", "x", s3_to_s3_oracle, "≤ 1.10",
                      spread(s3_to_s3_oracle).median <= 1.10, "", 3});
    auto directory_to_oracle = to_baseline(ours_directory, oracle_directory, "to_oracle");
    s.rows.push_back({cluster + ", one directory cache", "makespan / the oracle's split's", "x", directory_to_oracle,
                      "≤ 1.10", spread(directory_to_oracle).median <= 1.10, "", 3});
  }
  s.rows.push_back({cluster + ", one directory cache", "makespan / cluster bound", "x", ratios(ours_directory), "",
                    std::nullopt, "", 3});
  s.rows.push_back({"the oracle's split, one directory cache", "makespan / cluster bound", "x",
                    ratios(oracle_directory), "", std::nullopt, "what this machine adds to the bound", 3});
  s.rows.push_back({"the oracle's split, one s3:// cache", "makespan / cluster bound", "x", ratios(oracle_s3), "",
                    std::nullopt, "what S3 on this machine adds besides", 3});
  std::vector<double> per_graph, gateway_share;
  const double cores = static_cast<double>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  for (const auto& r : ours_s3) {
    per_graph.push_back(r.value("gateway_requests", 0.0) / static_cast<double>(total));
    gateway_share.push_back(r.value("gateway_cpu_seconds", 0.0) / (r["wall_seconds"].get<double>() * cores));
  }
  s.rows.push_back({"RADOS Gateway, in ours' S3 runs", "requests served per graph", "", per_graph, "", std::nullopt,
                    "", 1});
  s.rows.push_back({"RADOS Gateway, in ours' S3 runs", "CPU time of its daemons / (makespan × cores)", "x",
                    gateway_share, "", std::nullopt, "the machine's share the hosts could not use", 2});
  s.rows.push_back({"ours, one directory cache", "makespan", "s", walls(ours_directory), "", std::nullopt, "", 2});
  s.rows.push_back({"ours, one s3:// cache", "makespan", "s", walls(ours_s3), "", std::nullopt, "", 2});
  s.rows.push_back({"the oracle's split, one directory cache", "makespan", "s", walls(oracle_directory), "",
                    std::nullopt, "", 2});
  s.rows.push_back({"the oracle's split, one s3:// cache", "makespan", "s", walls(oracle_s3), "", std::nullopt, "", 2});

  s.workload = rig.workload().to_json();
  s.workload["hosts"] = shape.hosts;
  s.workload["workers_per_host"] = shape.workers;
  s.workload["bound_seconds"] = bound;
  s.raw = {{"ours_directory", ours_directory},
           {"ours_s3", ours_s3},
           {"oracle_directory", oracle_directory},
           {"oracle_s3", oracle_s3}};
  s.what =
      "A small cluster over short graphs: " + std::to_string(shape.hosts) + " simulated hosts × " +
      std::to_string(shape.workers) + " compile slots (each host a UTS + PID namespace, as in scenario 10) over " +
      std::to_string(total) + " graphs with log-normal costs between " +
      num(static_cast<double>(rig.workload().spec.small_min_ms) / 1000, 0) + " and " +
      num(static_cast<double>(rig.workload().spec.small_max_ms) / 1000, 0) +
      " s; the stand-in compiler runs in **sleep** mode. Sum of compiler costs " + num(rig.sum(), 1) +
      " s, longest " + num(rig.longest(), 2) + " s; **the cluster bound** max(sum / (" +
      std::to_string(shape.hosts) + " × " + std::to_string(shape.workers) + "), longest) = **" + num(bound, 2) +
      " s**. With graphs this short, the S3 work on each compile's path (the lock's create-only PUT, bringing the "
      "graph, uploading the result and releasing the lock) is a larger part of the makespan than in scenario 10. "
      "The contenders, as in scenario 10: ours (`neuron_parallel_compile --command compile --num_parallel " +
      std::to_string(shape.workers) + "` on every host) on one cache directory and on an `s3://` prefix of a RADOS "
      "Gateway with a mirror per host; and the oracle's split (every cost known, costliest first to the least "
      "loaded slot, each slot's list through `neuron_cc_wrapper compile`, no lock contended) on the same two "
      "caches. Every run is checked: every host exits 0, every graph is done in the cache, and the hosts' reports "
      "count each graph compiled exactly once.";
  return s;
}

} // namespace bench
