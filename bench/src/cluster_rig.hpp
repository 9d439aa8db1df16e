#pragma once
// Simulated hosts on one cache, for the cluster scenarios (10 and 10b). A
// host is a Linux UTS + PID namespace of its own (`unshare --uts --pid
// --fork --mount-proc`), so every host has its own hostname and its
// processes' pids collide with the other hosts', and a lock another host
// holds can only be judged by its record, as on a real cluster. The rig
// holds one graph set as pending entries, the compiler's measured costs, a
// RADOS Gateway, and the contenders that run on them: ours on a directory
// and on S3, and the oracle's split on each.

#include <cstddef>
#include <string>
#include <vector>

#include "harness.hpp"
#include "rgw.hpp"
#include "scenarios.hpp"
#include "workload.hpp"

namespace bench {

struct ClusterShape {
  int hosts = 16;
  int workers = 8;
};

[[nodiscard]] std::string host_name(int host); // host-NN
[[nodiscard]] std::string shell_quote(const std::string& word);

// Hosts that lose power mid-run: `after_seconds` after the start, each
// one's PID namespace loses its pid 1 (SIGKILL), which takes every process
// of the host with it, its launcher and its compiles.
struct Doom {
  std::vector<int> hosts;
  double after_seconds = 0;
  [[nodiscard]] bool dooms(int host) const;
};

// Starts one process per host at once, all in a shell that waits for every
// one; each host's output goes to <run>/<host>/output.log and its exit
// status to <run>/<host>/exit ("killed" for a doomed host). Returns the wall
// time from before the first start to after the last exit; every host but
// the doomed must exit 0.
json run_hosts(const Environment& env, const fs::path& run_dir, int hosts,
               const std::function<std::vector<std::string>(int host)>& argv_of, const Doom& doom = {});

// The launcher's report of each host, summed into `record`: graphs compiled
// by each host, and in all; a doomed host has none.
void add_reports(json& record, const fs::path& run_dir, int hosts, const Doom& doom = {});

class ClusterRig {
public:
  // Writes the graphs, extracts them into a template cache as pending
  // entries, measures the compiler's costs and starts the gateway, all under
  // the scratch folder `id`; throws, naming what is missing, when the
  // machine cannot simulate hosts.
  ClusterRig(const Context& context, std::string id, Workload workload, ClusterShape shape);

  [[nodiscard]] const Workload& workload() const { return workload_; }
  [[nodiscard]] std::size_t total() const { return workload_.graphs.size(); }
  [[nodiscard]] const ClusterShape& shape() const { return shape_; }
  [[nodiscard]] double sum() const { return sum_; }
  [[nodiscard]] double longest() const { return longest_; }
  // max(sum of costs / (hosts × workers), longest cost).
  [[nodiscard]] double bound(int hosts) const;
  [[nodiscard]] const Rgw& gateway() const { return gateway_; }
  [[nodiscard]] const fs::path& run_dir() const { return run_; }
  [[nodiscard]] const fs::path& graphs_dir() const { return graphs_; } // the graph files, and trial-order.txt
  [[nodiscard]] Environment directory_env() const;

  // Every host runs `neuron_parallel_compile --command compile` over one
  // cache of pending entries: a fresh copy of the template directory, or a
  // fresh s3:// prefix filled as a trial on one host leaves it (untimed),
  // each host with a mirror of its own. With a doom, the hosts it names
  // lose power mid-run. Records: wall_seconds, host_exits, compiled (per
  // host and in all), done, complete; on S3 the gateway's requests and CPU.
  [[nodiscard]] Contender ours_on_directory(const Doom& doom = {});
  [[nodiscard]] Contender ours_on_s3(const Doom& doom = {});
  // The oracle's split, the baseline ours is judged against: every graph's
  // cost known in advance, the graphs dealt costliest first to the slot with
  // the least work so far (longest processing time first), and each slot
  // running its list through the compile entry one after another, with no
  // lock ever contended: over `hosts` hosts on a directory, or over every
  // host on the same S3 cache as ours (each compile entry taking the lock
  // in S3, bringing the graph into its host's mirror and uploading the
  // result itself).
  [[nodiscard]] Contender oracle_on_directory(int hosts);
  [[nodiscard]] Contender oracle_on_s3();

  // argv of host `h`'s launcher over the cache in the environment.
  [[nodiscard]] std::vector<std::string> launcher_argv(int h) const;
  // The run folder emptied, with a fresh copy of the template cache in it.
  void fresh_directory_cache() const;

private:
  void fresh() const;
  void fill_s3_prefix();
  [[nodiscard]] Environment s3_env(const std::string& url) const;
  [[nodiscard]] std::vector<std::string> s3_launcher_argv(int h) const;
  [[nodiscard]] std::vector<std::vector<std::string>> oracle_plan(int hosts) const;
  [[nodiscard]] std::vector<std::string> oracle_argv(const std::vector<std::vector<std::string>>& plan, int h) const;
  [[nodiscard]] std::size_t done_in(const Environment& env) const;
  void check(json& record, const Environment& env, const Doom& doom) const;

  const Context& context_;
  std::string id_;
  Workload workload_;
  ClusterShape shape_;
  fs::path dir_, graphs_, template_cache_, run_;
  CompilerOverhead overhead_;
  double sum_ = 0, longest_ = 0;
  Rgw gateway_;
  int s3_round_ = 0;
  std::string url_; // the S3 prefix of the current round
};

} // namespace bench
