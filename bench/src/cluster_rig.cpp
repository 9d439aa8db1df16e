#include "cluster_rig.hpp"

#include <algorithm>
#include <stdexcept>

#include <npc/storage/lock.hpp>

#include "fixtures.hpp"

namespace bench {

namespace {

constexpr const char* kClusterBucket = "cluster";

// The start of every host's command line: a UTS and PID namespace (with its
// own /proc, so the host sees only its own processes) named `name`.
std::vector<std::string> as_host(const std::string& name) {
  return {"unshare", "--uts", "--pid", "--fork", "--mount-proc", "--", "/bin/sh", "-c",
          "hostname \"$0\" && exec \"$@\"", name};
}

void require_namespaces(const Context& context) {
  fs::path log = context.options.scratch / "unshare-probe.log";
  std::vector<std::string> argv = as_host("probe");
  argv.push_back("/bin/true");
  Timed t = run_timed({argv, Environment::current(), log, std::nullopt});
  if (!t.status.success())
    throw std::runtime_error("simulating hosts needs `unshare --uts --pid --fork --mount-proc` (util-linux, run as "
                             "root): it failed with " + t.status.describe() + ", see " + log.string());
}

// The scenario's scratch folder, made once the machine is known to
// simulate hosts.
fs::path probed_scratch(const Context& context, const std::string& id) {
  require_namespaces(context);
  make_dirs(context.options.scratch / id);
  return context.options.scratch / id;
}

} // namespace

std::string host_name(int host) {
  std::string digits = std::to_string(host);
  return "host-" + std::string(digits.size() < 2 ? 2 - digits.size() : 0, '0') + digits;
}

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

bool Doom::dooms(int host) const { return std::find(hosts.begin(), hosts.end(), host) != hosts.end(); }

json run_hosts(const Environment& env, const fs::path& run_dir, int hosts,
               const std::function<std::vector<std::string>(int host)>& argv_of, const Doom& doom) {
  std::string script, pid_files;
  for (int h = 0; h < hosts; ++h) {
    fs::path host_dir = run_dir / host_name(h);
    make_dirs(host_dir);
    std::vector<std::string> argv = as_host(host_name(h));
    for (auto& word : argv_of(h)) argv.push_back(std::move(word));
    std::string command;
    for (const auto& word : argv) command += shell_quote(word) + " ";
    command += "> " + shell_quote((host_dir / "output.log").string()) + " 2>&1";
    if (doom.dooms(h)) {
      // $! is the unshare process; its child is the namespace's pid 1.
      const std::string pid_file = shell_quote((host_dir / "unshare.pid").string());
      script += command + " &\necho $! > " + pid_file + "\n";
      pid_files += pid_file + " ";
    } else {
      script += "(" + command + "; echo $? > " + shell_quote((host_dir / "exit").string()) + ") &\n";
    }
  }
  if (!pid_files.empty())
    script += "(sleep " + num(doom.after_seconds, 3) + "; for f in " + pid_files +
              "; do p=$(cat \"$f\"); kill -9 $(cat /proc/$p/task/$p/children) 2>/dev/null; done) &\n";
  script += "wait\n";
  write_text(run_dir / "hosts.sh", script);
  Timed t = run_timed({{"/bin/sh", (run_dir / "hosts.sh").string()}, env, run_dir / "hosts.log", std::nullopt});
  json exits = json::array();
  bool all_zero = true;
  for (int h = 0; h < hosts; ++h) {
    if (doom.dooms(h)) {
      exits.push_back("killed");
      continue;
    }
    std::string code = read_text(run_dir / host_name(h) / "exit");
    while (!code.empty() && (code.back() == '\n' || code.back() == ' ')) code.pop_back();
    exits.push_back(code);
    all_zero = all_zero && code == "0";
  }
  return {{"wall_seconds", t.seconds}, {"host_exits", exits}, {"all_hosts_exit_0", all_zero}};
}

void add_reports(json& record, const fs::path& run_dir, int hosts, const Doom& doom) {
  int compiled = 0, failed = 0, busy_hosts = 0;
  json per_host = json::array();
  for (int h = 0; h < hosts; ++h) {
    if (doom.dooms(h)) {
      per_host.push_back(nullptr);
      continue;
    }
    json doc = json::parse(read_text(run_dir / host_name(h) / "report.json"), nullptr, false);
    int c = -1, f = -1;
    if (!doc.is_discarded() && doc.contains("compilation_summary")) {
      c = doc["compilation_summary"].value("compiled", 0);
      f = doc["compilation_summary"].value("failed", 0);
    }
    per_host.push_back(c);
    if (c < 0) {
      record["report_missing"] = true;
      continue;
    }
    compiled += c;
    failed += f;
    if (c > 0) ++busy_hosts;
  }
  record["compiled"] = compiled;
  record["failed"] = failed;
  record["compiled_per_host"] = per_host;
  record["hosts_that_compiled"] = busy_hosts;
}

ClusterRig::ClusterRig(const Context& context, std::string id, Workload workload, ClusterShape shape)
    : context_(context), id_(std::move(id)), workload_(std::move(workload)), shape_(shape),
      dir_(probed_scratch(context, id_)), graphs_(dir_ / "graphs"), template_cache_(dir_ / "template-cache"),
      run_(dir_ / "run"), gateway_(dir_ / "rgw", kClusterBucket) {
  write_graphs(workload_, graphs_);
  extract_into_cache(context_, workload_, graphs_, template_cache_, dir_ / "extract.log");
  overhead_ = measure_compiler_overhead(context_, workload_, graphs_, dir_ / "calibration", directory_env());
  for (const auto& g : workload_.graphs) {
    sum_ += overhead_.cost(g);
    longest_ = std::max(longest_, overhead_.cost(g));
  }
}

double ClusterRig::bound(int hosts) const { return std::max(sum_ / (hosts * shape_.workers), longest_); }

Environment ClusterRig::directory_env() const {
  Environment env = clean_environment(context_.programs, run_ / "cache");
  env.set("STANDIN_CC_MODE", "sleep");
  return env;
}

Environment ClusterRig::s3_env(const std::string& url) const {
  Environment env = clean_environment(context_.programs, url);
  env.set("STANDIN_CC_MODE", "sleep");
  gateway_.configure(env, dir_);
  return env;
}

void ClusterRig::fresh() const {
  wipe(run_);
  make_dirs(run_);
}

void ClusterRig::fresh_directory_cache() const {
  fresh();
  copy_tree(template_cache_, run_ / "cache");
}

std::vector<std::string> ClusterRig::launcher_argv(int h) const {
  fs::path host_dir = run_ / host_name(h);
  return {context_.programs.launcher.string(), "--command", "compile", "--num_parallel",
          std::to_string(shape_.workers), "--parallel_compile_workdir", (host_dir / "work").string(), "--report",
          (host_dir / "report.json").string()};
}

// On S3 each host has a mirror of its own.
std::vector<std::string> ClusterRig::s3_launcher_argv(int h) const {
  std::vector<std::string> argv = {"env", "NEURON_COMPILE_CACHE_MIRROR=" + (run_ / host_name(h) / "mirror").string()};
  for (auto& word : launcher_argv(h)) argv.push_back(std::move(word));
  return argv;
}

// A fresh prefix per round, filled with the pending entries as a trial on
// one host leaves them. The gateway is a child of the bench for the whole
// scenario, so the rounds do not reap what a run left behind; nothing can
// be: a host's processes die with its PID namespace.
void ClusterRig::fill_s3_prefix() {
  fresh();
  url_ = std::string("s3://") + kClusterBucket + "/" + id_ + "-run-" + std::to_string(s3_round_++);
  Environment env = s3_env(url_);
  env.set("NEURON_COMPILE_CACHE_MIRROR", (run_ / "extract-mirror").string());
  env.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
  make_dirs(run_ / "placeholders");
  for (const auto& g : workload_.graphs)
    std::ignore = run_checked({{context_.programs.wrapper.string(), "compile", "--graph", (graphs_ / g.name).string(),
                                "--output", (run_ / "placeholders" / (g.name + ".neff")).string()},
                               env, run_ / "extract.log", std::nullopt},
                              "extracting " + g.name + " into " + url_);
}

// Done entries in a cache, as neuron_cache counts them (a directory or S3).
std::size_t ClusterRig::done_in(const Environment& env) const {
  const fs::path log = run_ / "stats.log";
  std::ignore = run_checked({{context_.programs.cache_tool.string(), "--json", "stats"}, env, log, std::nullopt},
                            "neuron_cache stats");
  // The JSON document starts with a line of its own ("{"): anything before
  // it is a warning on stderr.
  std::string text = read_text(log);
  auto at = text.starts_with("{\n") ? 0 : text.find("\n{\n");
  json doc = at == std::string::npos ? json() : json::parse(text.substr(at), nullptr, false);
  if (doc.is_discarded() || !doc.contains("states"))
    throw std::runtime_error("neuron_cache --json stats printed no counts: see " + log.string());
  return doc["states"].value("done", std::size_t{0});
}

// Every host exits 0, every graph is done, and the hosts' reports count
// each graph compiled exactly once; with hosts killed, at most once among
// the survivors (the dead may have compiled some).
void ClusterRig::check(json& r, const Environment& env, const Doom& doom) const {
  const auto total = static_cast<int>(this->total());
  add_reports(r, run_, shape_.hosts, doom);
  r["done"] = done_in(env);
  const bool once = doom.hosts.empty() ? r.value("compiled", 0) == total : r.value("compiled", 0) <= total;
  r["complete"] = r.value("all_hosts_exit_0", false) && r.value("done", 0) == total && once;
  const double wall = r["wall_seconds"].get<double>();
  std::string line = id_ + ": makespan " + num(wall) + " s (" + num(wall / bound(shape_.hosts), 3) + "x the bound)";
  if (!doom.hosts.empty()) {
    const double lease = static_cast<double>(npc::storage::kLockTtl.count());
    const int survivors = shape_.hosts - static_cast<int>(doom.hosts.size());
    r["beyond_lease_to_survivors_bound"] = (wall - lease) / bound(survivors);
    line += " with " + std::to_string(doom.hosts.size()) + " hosts killed at " + num(doom.after_seconds) + " s, " +
            num(r["beyond_lease_to_survivors_bound"].get<double>(), 3) + "x the survivors' bound beyond the lease";
  }
  log(context_, line + ", " + std::to_string(r.value("compiled", 0)) + " compiled, " +
                    std::to_string(r.value("done", 0)) + " done" +
                    (r.value("all_hosts_exit_0", false) ? "" : ", a host failed"));
}

Contender ClusterRig::ours_on_directory(const Doom& doom) {
  return {std::string("ours-directory") + (doom.hosts.empty() ? "" : "-killed"),
          [this](int) { fresh_directory_cache(); },
          [this, doom](int) {
            Environment env = directory_env();
            json r = run_hosts(env, run_, shape_.hosts, [this](int h) { return launcher_argv(h); }, doom);
            check(r, env, doom);
            return r;
          }};
}

Contender ClusterRig::ours_on_s3(const Doom& doom) {
  return {std::string("ours-s3") + (doom.hosts.empty() ? "" : "-killed"), [this](int) { fill_s3_prefix(); },
          [this, doom](int) {
            Environment env = s3_env(url_);
            const std::size_t requests_before = gateway_.requests_served();
            const double cpu_before = gateway_.cpu_seconds();
            json r = run_hosts(env, run_, shape_.hosts, [this](int h) { return s3_launcher_argv(h); }, doom);
            // What the gateway, on the same cores as the hosts, did meanwhile.
            r["gateway_requests"] = gateway_.requests_served() - requests_before;
            r["gateway_cpu_seconds"] = gateway_.cpu_seconds() - cpu_before;
            env.set("NEURON_COMPILE_CACHE_MIRROR", (run_ / "stats-mirror").string());
            check(r, env, doom);
            return r;
          }};
}

std::vector<std::vector<std::string>> ClusterRig::oracle_plan(int hosts) const {
  std::vector<std::size_t> order(workload_.graphs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return overhead_.cost(workload_.graphs[a]) > overhead_.cost(workload_.graphs[b]);
  });
  std::vector<std::vector<std::string>> slot_graphs(static_cast<std::size_t>(hosts * shape_.workers));
  std::vector<double> load(slot_graphs.size(), 0.0);
  for (std::size_t i : order) {
    const auto least = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += overhead_.cost(workload_.graphs[i]);
    slot_graphs[least].push_back(workload_.graphs[i].name);
  }
  return slot_graphs;
}

std::vector<std::string> ClusterRig::oracle_argv(const std::vector<std::vector<std::string>>& plan, int h) const {
  fs::path host_dir = run_ / host_name(h);
  make_dirs(host_dir / "out");
  std::string script = "rc=0; pids=;";
  for (int w = 0; w < shape_.workers; ++w) {
    fs::path list = host_dir / ("slot-" + std::to_string(w) + ".txt");
    std::string lines;
    for (const auto& name : plan[static_cast<std::size_t>(h * shape_.workers + w)]) lines += name + "\n";
    write_text(list, lines);
    script += " xargs -I{} " + shell_quote(context_.programs.wrapper.string()) + " compile --graph " +
              shell_quote(graphs_.string()) + "/{} --output " + shell_quote((host_dir / "out").string()) +
              "/{}.neff < " + shell_quote(list.string()) + " & pids=\"$pids $!\";";
  }
  script += " for p in $pids; do wait $p || rc=1; done; exit $rc";
  return {"/bin/sh", "-c", script};
}

Contender ClusterRig::oracle_on_directory(int hosts) {
  return {"oracle-" + std::to_string(hosts) + "-hosts", [this](int) { fresh_directory_cache(); },
          [this, hosts, plan = oracle_plan(hosts)](int) {
            Environment env = directory_env();
            json r = run_hosts(env, run_, hosts, [&](int h) { return oracle_argv(plan, h); });
            r["done"] = count_done(run_ / "cache");
            r["complete"] = r.value("all_hosts_exit_0", false) && r.value("done", 0) == static_cast<int>(total());
            log(context_, id_ + ": the oracle's split over " + std::to_string(hosts) + " hosts: makespan " +
                              num(r["wall_seconds"].get<double>()) + " s");
            return r;
          }};
}

Contender ClusterRig::oracle_on_s3() {
  return {"oracle-s3", [this](int) { fill_s3_prefix(); },
          [this, plan = oracle_plan(shape_.hosts)](int) {
            Environment env = s3_env(url_);
            json r = run_hosts(env, run_, shape_.hosts, [&](int h) {
              std::vector<std::string> argv = {"env",
                                               "NEURON_COMPILE_CACHE_MIRROR=" + (run_ / host_name(h) / "mirror").string()};
              for (auto& word : oracle_argv(plan, h)) argv.push_back(std::move(word));
              return argv;
            });
            env.set("NEURON_COMPILE_CACHE_MIRROR", (run_ / "stats-mirror").string());
            r["done"] = done_in(env);
            r["complete"] = r.value("all_hosts_exit_0", false) && r.value("done", 0) == static_cast<int>(total());
            log(context_, id_ + ": the oracle's split on S3: makespan " + num(r["wall_seconds"].get<double>()) + " s");
            return r;
          }};
}

} // namespace bench
