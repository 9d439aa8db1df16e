// Scenario 10: a cluster as one pool. K hosts with N compile slots each
// pre-compile one graph set; a host is a Linux UTS + PID namespace of its
// own (`unshare --uts --pid --fork --mount-proc`), so every host has its own
// hostname and its processes' pids collide with the other hosts', and a lock
// another host holds can only be judged by its record, as on a real
// cluster. The compiler runs in sleep mode, so K × N compiles fit on a small
// machine. Three ways, as users run them:
//  - ours: every host runs `neuron_parallel_compile --command compile` over
//    one cache holding the graphs as pending entries (a directory, then an
//    s3:// prefix on a RADOS Gateway with a mirror per host);
//  - per-node caches: what the public samples do, every host compiles every
//    graph into its own cache; one such host is timed alone (the others do
//    the same in parallel on their own cores);
//  - the original's lockstep order on a shared directory: every host walks
//    the graphs in trial order, N at a time, through the compile entry, which
//    waits on a graph another host holds and then takes its NEFF.
// The makespan (first start to last exit) is measured against the oracle's
// split, run in the same rounds: every cost known, the graphs dealt
// costliest first to the least loaded of the K × N slots, no lock contended;
// and shown against the cluster bound max(sum of costs / (K × N), longest
// cost), which leaves out what the machine adds to every compile started.

#include <algorithm>
#include <unistd.h>

#include <npc/storage/lock.hpp>

#include "cluster_rig.hpp"
#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

WorkloadSpec cluster_spec(bool quick) {
  WorkloadSpec spec;
  spec.name = "cluster";
  spec.seed = 20261127;
  spec.small_count = quick ? 40 : 300;
  spec.small_median_ms = quick ? 600 : 4000;
  spec.small_sigma = 0.5;
  spec.small_min_ms = quick ? 200 : 1500;
  spec.small_max_ms = quick ? 2000 : 10000;
  spec.large_ms = quick ? std::vector<std::uint64_t>{2500, 2500} : std::vector<std::uint64_t>{11000, 11000, 12000, 12000};
  spec.bytes_per_ms = 20;
  return spec;
}

} // namespace

Scenario run_cluster(const Context& context) {
  Scenario s;
  s.id = "cluster";
  s.title = "10. A cluster as one pool: simulated hosts on one cache";
  s.reproduce = "bench/run.sh --only cluster";
  const bool quick = context.options.quick;
  const ClusterShape shape = quick ? ClusterShape{4, 4} : ClusterShape{16, 8};
  const int slots = shape.hosts * shape.workers;
  ClusterRig rig(context, s.id, generate(cluster_spec(quick)), shape);
  const Workload& workload = rig.workload();
  const std::size_t total = rig.total();
  const double sum = rig.sum(), longest = rig.longest();
  const double bound = rig.bound(shape.hosts);
  const double node_bound = std::max(sum / shape.workers, longest);
  const fs::path run = rig.run_dir();
  log(context, s.id + ": " + std::to_string(shape.hosts) + " hosts x " + std::to_string(shape.workers) +
                   " workers, " + std::to_string(total) + " graphs, sum " + num(sum, 1) + " s, cluster bound " +
                   num(bound) + " s");

  std::vector<Contender> ours = {rig.ours_on_directory(), rig.ours_on_s3(), rig.oracle_on_directory(shape.hosts),
                                 rig.oracle_on_s3()};
  auto ours_records = alternate(context, s.id + " ours", ours, 0, Settle::no);
  std::vector<json>& ours_directory_records = ours_records[0];
  std::vector<json>& ours_s3_records = ours_records[1];
  std::vector<json>& oracle_records = ours_records[2];
  std::vector<json>& s3_oracle_records = ours_records[3];

  // Two hosts lose power a third of the way into the bound: the survivors
  // compile what the dead held once its locks' leases lapse, and what they
  // owned. Judged against the survivors' bound plus the lease.
  const Doom doom{{shape.hosts / 4, (3 * shape.hosts) / 4}, bound / 3};
  const int survivors = shape.hosts - static_cast<int>(doom.hosts.size());
  const double survivors_bound = rig.bound(survivors);
  const double lease = static_cast<double>(npc::storage::kLockTtl.count());
  std::vector<Contender> doomed = {rig.ours_on_directory(doom), rig.ours_on_s3(doom)};
  doomed.push_back(rig.oracle_on_directory(survivors));
  auto doomed_records = alternate(context, s.id + " two hosts killed", doomed, 0, Settle::no);
  std::vector<json>& doomed_directory_records = doomed_records[0];
  std::vector<json>& doomed_s3_records = doomed_records[1];
  std::vector<json>& survivors_oracle_records = doomed_records[2];

  // The baselines run once: they take about K times longer than ours, and a
  // ratio of that size needs no spread to be read.
  log(context, s.id + ": per-node caches (one host alone, every graph)");
  rig.fresh_directory_cache();
  json per_node = run_hosts(rig.directory_env(), run, 1, [&](int h) { return rig.launcher_argv(h); });
  add_reports(per_node, run, 1);
  per_node["complete"] = per_node.value("all_hosts_exit_0", false) && per_node.value("compiled", 0) == static_cast<int>(total);
  per_node["run"] = 0;

  log(context, s.id + ": the original's lockstep order on a shared directory");
  wipe(run);
  make_dirs(run / "cache");
  const fs::path& graphs = rig.graphs_dir();
  json lockstep = run_hosts(rig.directory_env(), run, shape.hosts, [&](int h) {
    fs::path out = run / host_name(h) / "out";
    make_dirs(out);
    return std::vector<std::string>{
        "/bin/sh", "-c",
        "xargs -P " + std::to_string(shape.workers) + " -I{} " + shell_quote(context.programs.wrapper.string()) +
            " compile --graph " + shell_quote(graphs.string()) + "/{} --output " + shell_quote(out.string()) +
            "/{}.neff < " + shell_quote((graphs / "trial-order.txt").string())};
  });
  lockstep["done"] = count_done(run / "cache");
  std::size_t neffs = 0;
  for (int h = 0; h < shape.hosts; ++h) neffs += count_files(run / host_name(h) / "out", ".neff");
  lockstep["neffs"] = neffs;
  lockstep["complete"] = lockstep.value("all_hosts_exit_0", false) && lockstep.value("done", 0) == static_cast<int>(total) &&
                         neffs == total * static_cast<std::size_t>(shape.hosts);
  lockstep["run"] = 0;

  std::vector<std::pair<std::string, std::vector<json>*>> all = {
      {"ours on a directory", &ours_directory_records},
      {"ours on S3", &ours_s3_records},
      {"ours on a directory, two hosts killed", &doomed_directory_records},
      {"ours on S3, two hosts killed", &doomed_s3_records},
      {"the oracle's split", &oracle_records},
      {"the oracle's split on S3", &s3_oracle_records},
      {"the oracle's split over the survivors", &survivors_oracle_records}};
  std::vector<json> per_node_records = {per_node}, lockstep_records = {lockstep};
  all.push_back({"per-node caches", &per_node_records});
  all.push_back({"lockstep", &lockstep_records});
  std::string incomplete;
  for (auto& [name, records] : all)
    for (auto& r : *records) {
      r["ratio_to_bound"] = r["wall_seconds"].get<double>() / bound;
      if (!r.value("complete", false)) incomplete += " " + name + "#" + std::to_string(r.value("run", 0));
    }
  // A ratio from a run that did not compile every graph once means nothing.
  if (!incomplete.empty())
    throw std::runtime_error("some runs did not compile every graph exactly once (" + incomplete.substr(1) +
                             "); look with `npc_bench --keep --only cluster`");

  // Each run of ours against the oracle's run of the same round: both met
  // the machine in the same state.
  auto to_oracle = [](std::vector<json>& records, const std::vector<json>& oracles, double less,
                      const char* field = "to_oracle") {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < records.size() && r < oracles.size(); ++r) {
      records[r][field] = (records[r]["wall_seconds"].get<double>() - less) / oracles[r]["wall_seconds"].get<double>();
      ratios.push_back(records[r][field].get<double>());
    }
    return ratios;
  };
  std::string cluster = std::to_string(shape.hosts) + " hosts × " + std::to_string(shape.workers) + " workers";
  auto ratios = [](const std::vector<json>& records) { return column(records, "ratio_to_bound"); };
  auto walls = [](const std::vector<json>& records) { return column(records, "wall_seconds"); };
  {
    auto directory = to_oracle(ours_directory_records, oracle_records, 0);
    auto s3 = to_oracle(ours_s3_records, oracle_records, 0);
    s.rows.push_back({"ours, " + cluster + ", one directory cache", "makespan / the oracle's split's", "x", directory,
                      "≤ 1.10", spread(directory).median <= 1.10, "", 3});
    s.rows.push_back({"ours, " + cluster + ", one s3:// cache (RADOS Gateway)", "makespan / the oracle's split's", "x",
                      s3, "≤ 1.10", spread(s3).median <= 1.10, "", 3});
    auto s3_to_s3 = to_oracle(ours_s3_records, s3_oracle_records, 0, "to_s3_oracle");
    s.rows.push_back({"ours, " + cluster + ", one s3:// cache (RADOS Gateway)",
                      "makespan / the oracle's split's on the same S3 cache", "x", s3_to_s3, "≤ 1.10",
                      spread(s3_to_s3).median <= 1.10, "", 3});
  }
  {
    const std::string killed = ", 2 of " + std::to_string(shape.hosts) + " hosts killed at a third of the bound";
    auto directory = to_oracle(doomed_directory_records, survivors_oracle_records, lease);
    auto s3 = to_oracle(doomed_s3_records, survivors_oracle_records, lease);
    s.rows.push_back({"ours, one directory cache" + killed, "(makespan − lease) / the survivors' oracle's", "x",
                      directory, "≤ 1.15", spread(directory).median <= 1.15, "", 3});
    s.rows.push_back({"ours, one s3:// cache" + killed, "(makespan − lease) / the survivors' oracle's", "x", s3,
                      "≤ 1.15", spread(s3).median <= 1.15, "", 3});
    s.notes.push_back(
        "With hosts killed: hosts " + host_name(doom.hosts[0]) + " and " + host_name(doom.hosts[1]) +
        " lose power (SIGKILL of their PID namespace's pid 1, which takes their launcher and compiles with it) " +
        num(doom.after_seconds, 1) + " s in, a third of the cluster bound. The survivors' bound is max(sum / (" +
        std::to_string(survivors) + " × " + std::to_string(shape.workers) + "), longest) = " +
        num(survivors_bound, 2) + " s, and the lease " + num(lease, 0) +
        " s: a graph the dead held is free to the survivors once its lock's lease lapses, up to 60 s after its "
        "last renewal. The baseline is the oracle's split over the " + std::to_string(survivors) +
        " survivors alone, run in the same rounds. Every survivor exits 0 and every graph is done in the cache in "
        "each run.");
  }
  s.rows.push_back({"ours, " + cluster + ", one directory cache", "makespan / cluster bound", "x",
                    ratios(ours_directory_records), "", std::nullopt, "", 3});
  s.rows.push_back({"ours, " + cluster + ", one s3:// cache (RADOS Gateway)", "makespan / cluster bound", "x",
                    ratios(ours_s3_records), "", std::nullopt, "", 3});
  s.rows.push_back({"the oracle's split, " + cluster + ", one directory cache", "makespan / cluster bound", "x",
                    ratios(oracle_records), "", std::nullopt, "what this machine adds to the bound", 3});
  s.rows.push_back({"the oracle's split, " + cluster + ", one s3:// cache", "makespan / cluster bound", "x",
                    ratios(s3_oracle_records), "", std::nullopt, "what S3 on this machine adds besides", 3});
  {
    auto beyond = [](const std::vector<json>& records) { return column(records, "beyond_lease_to_survivors_bound"); };
    s.rows.push_back({"ours, one directory cache, 2 hosts killed", "(makespan − lease) / survivors' bound", "x",
                      beyond(doomed_directory_records), "", std::nullopt, "", 3});
    s.rows.push_back({"ours, one s3:// cache, 2 hosts killed", "(makespan − lease) / survivors' bound", "x",
                      beyond(doomed_s3_records), "", std::nullopt, "", 3});
  }
  s.rows.push_back({"per-node caches (every host compiles every graph)", "makespan / cluster bound", "x",
                    ratios(per_node_records), "", std::nullopt, "one host timed alone; the others do the same", 2,
                    true});
  s.rows.push_back({"original's lockstep order, one directory cache", "makespan / cluster bound", "x",
                    ratios(lockstep_records), "", std::nullopt, "", 2, true});
  // What the gateway did in the S3 runs: it shares this machine's cores with
  // every host, which a real S3 does not.
  const double cores = static_cast<double>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  std::vector<double> gateway_requests, gateway_share;
  for (const auto& r : ours_s3_records) {
    gateway_requests.push_back(r.value("gateway_requests", 0.0));
    gateway_share.push_back(r.value("gateway_cpu_seconds", 0.0) / (r["wall_seconds"].get<double>() * cores));
  }
  s.rows.push_back({"RADOS Gateway, in ours' S3 runs", "requests served", "", gateway_requests, "", std::nullopt, "", 0});
  s.rows.push_back({"RADOS Gateway, in ours' S3 runs", "CPU time of its daemons / (makespan × cores)", "x",
                    gateway_share, "", std::nullopt, "the machine's share the hosts could not use", 2});
  {
    double requests = spread(gateway_requests).median, wall = spread(walls(ours_s3_records)).median;
    s.notes.push_back(
        "On S3 the gateway answered " + count_text(static_cast<std::size_t>(requests)) +
        " requests in the median run (" + num(requests / wall, 0) + " a second) and its daemons used " +
        num(spread(gateway_share).median * 100, 0) + "% of this machine's " + std::to_string(static_cast<int>(cores)) +
        " cores, which the " + std::to_string(shape.hosts) + " hosts' " + std::to_string(slots) +
        " compiles share with it (a real S3 does not take the hosts' cores). How the hosts share the work: each "
        "launcher puts itself on a roll under the cache's .npc/launchers/ as it starts, and the graphs are split "
        "among the launchers on it by rendezvous hashing, so each starts its own share first, costliest first, and "
        "then helps with the others' graphs; the few graphs costlier than the work per slot of the cluster are "
        "everyone's, each launcher starting at most its part of them (their number over the launchers', at least one) beyond its own share, so the first launchers to reach their compile phase start them; later, another's graph costlier than the work left per slot of the cluster (and 1.5 times its own costliest) comes before a launcher's own. It takes a graph's lock itself (one create-only PUT, since the gateway "
        "honours If-None-Match, which the launcher finds out once), lists the entry and brings its graph (and its "
        "flags, from memory once it has brought those of the same flags hash) before the "
        "worker starts, so the worker compiles in the mirror without an S3 client of its own; the upload of the "
        "result goes by that listing; the takes, and the "
        "uploads of results with the release of their locks, run on the launcher's transfer threads beside its "
        "event loop. A graph of its own share is taken without a look first; another's is looked at through one "
        "walk of the version folder (reused for half a second), and a lock object is read only when it is older "
        "than the launcher or 10 s, in the collect's walk as in the looks. A launcher with nothing left but graphs held elsewhere looks at them from 0.2 s "
        "apart again (each listed when they are fewer than 4 per page of the folder, else with a walk at most 150 ms "
        "old), backing off from when it ran out of work. What is left: every request waits for a share of "
        "the 2 cores the gateway itself uses; at the start, the 16 launchers, 128 workers and the gateway start "
        "together on those cores, so the median slot's first compile starts about a second in; and the hash split "
        "leaves some launchers' shares costlier than others', so a few graphs of 5 s start 7 to 8 s in.");
  }
  s.rows.push_back({"ours, one directory cache", "makespan", "s", walls(ours_directory_records), "", std::nullopt, "", 2});
  s.rows.push_back({"ours, one s3:// cache", "makespan", "s", walls(ours_s3_records), "", std::nullopt, "", 2});
  s.rows.push_back({"ours, one directory cache, 2 hosts killed", "makespan", "s", walls(doomed_directory_records), "",
                    std::nullopt, "", 2});
  s.rows.push_back({"ours, one s3:// cache, 2 hosts killed", "makespan", "s", walls(doomed_s3_records), "",
                    std::nullopt, "", 2});
  s.rows.push_back({"the oracle's split", "makespan", "s", walls(oracle_records), "", std::nullopt, "", 2});
  s.rows.push_back({"the oracle's split over the survivors", "makespan", "s", walls(survivors_oracle_records), "",
                    std::nullopt, "", 2});
  s.rows.push_back({"per-node caches", "makespan", "s", walls(per_node_records), "", std::nullopt, "", 1});
  s.rows.push_back({"original's lockstep order", "makespan", "s", walls(lockstep_records), "", std::nullopt, "", 1});

  s.workload = workload.to_json();
  s.workload["hosts"] = shape.hosts;
  s.workload["workers_per_host"] = shape.workers;
  s.workload["bound_seconds"] = bound;
  s.workload["bound"] = "max(sum of compiler costs / (hosts × workers), longest compiler cost); a compiler cost is "
                        "the configured cost plus the stand-in's own time, measured solo";
  s.workload["one_node_bound_seconds"] = node_bound;
  s.workload["killed_hosts"] = doom.hosts.size();
  s.workload["killed_after_seconds"] = doom.after_seconds;
  s.workload["survivors_bound_seconds"] = survivors_bound;
  s.raw = {{"ours_directory", ours_directory_records},
           {"ours_s3", ours_s3_records},
           {"ours_directory_2_killed", doomed_directory_records},
           {"ours_s3_2_killed", doomed_s3_records},
           {"oracle", oracle_records},
           {"oracle_survivors", survivors_oracle_records},
           {"per_node", per_node_records},
           {"lockstep", lockstep_records}};

  s.what =
      "Each simulated host is a UTS + PID namespace of its own (`unshare --uts --pid --fork --mount-proc`, then "
      "`hostname host-NN`): hostnames differ and the hosts' pids collide, so a lock held by another host can be "
      "judged only by its record and its renewals, as on a real cluster (the hosts share this machine's 2 cores and "
      "clock). The stand-in compiler runs in **sleep** mode. The graph set: " + std::to_string(total) +
      " graphs, " + std::to_string(workload.spec.small_count) + " with log-normal costs (median " +
      num(workload.spec.small_median_ms / 1000, 1) + " s) and " + std::to_string(workload.spec.large_ms.size()) +
      " large ones last in the trial order; sum of compiler costs " + num(sum, 1) + " s, longest " +
      num(longest, 2) + " s (configured cost plus the stand-in's own time, measured solo as in scenario 1). "
      "**The cluster bound** is max(sum / (" + std::to_string(shape.hosts) + " × " + std::to_string(shape.workers) +
      "), longest) = **" + num(bound, 2) + " s**. The makespan is from before the first host starts to after the "
      "last one exits. Ours is judged against **the oracle's split**, run in the same rounds: every graph's cost "
      "known in advance, the graphs dealt costliest first to the slot with the least work so far, each slot running "
      "its list through `neuron_cc_wrapper compile` one after another on one cache directory, no lock ever "
      "contended. Its makespan is the bound plus what this machine adds to every compile it starts (a process "
      "chain each, " + std::to_string(slots) + " at once on its cores), which the bound, measured solo, leaves out; "
      "the ratios to the bound are shown too. Ours on S3 is judged against it, and against **the oracle's split on "
      "the same S3 cache**: the same slots and lists, each compile entry taking its graph's lock in S3, bringing "
      "the graph into its host's mirror and uploading the result itself; the first ratio shows what S3 costs "
      "on this machine (the gateway shares its cores) besides the coordination, the second the coordination "
      "alone.\n\n"
      "The contenders: **ours on a directory**, every host runs `neuron_parallel_compile --command compile "
      "--num_parallel " + std::to_string(shape.workers) + "` over one cache directory holding the graphs as pending "
      "entries (a fresh copy per run, untimed); **ours on S3**, the same over an `s3://` prefix on a RADOS Gateway "
      "(Ceph, from Debian, on loopback: it honours the create-only PUT the locks use), filled per run by the "
      "extraction of one host (untimed), each host with a mirror of its own; **per-node caches**, what the public "
      "cluster samples do (every host compiles every graph into its own cache): one host runs the launcher alone "
      "over a private copy, and its makespan is the cluster's since every host does the same on its own cores; "
      "**the original's lockstep order**, every host walks the graphs in trial order " +
      std::to_string(shape.workers) + " at a time (`xargs -P " + std::to_string(shape.workers) +
      "` over `neuron_cc_wrapper compile`) on one shared cache directory, where a compile finding the graph's lock "
      "held by another host waits for it and takes the NEFF. Ours runs " + std::to_string(ours_directory_records.size()) +
      " times on each cache, as does the oracle's split; the other baselines, K times slower, once. Every run is checked: every host exits 0, every "
      "graph is done in the cache, and the hosts' reports together count each graph compiled exactly once.";
  return s;
}

} // namespace bench
