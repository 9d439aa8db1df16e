// neuron_parallel_compile on an S3 cache (the run's RADOS Gateway on loopback): the
// trial extracts its graphs into S3, the launcher brings them into this
// node's mirror, compiles there and uploads each entry, model.done last;
// another node's launcher downloads instead of compiling; --command compile
// takes the pending graphs of S3; two launchers at once compile each graph
// once; a graph whose lock another node holds is waited for by looking at
// S3 (no worker started to meet the lock), counted compiled there when its
// result lands, and compiled here when the lock expires.

#include <chrono>
#include <csignal>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/process.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

class S3Launcher : public S3CacheTest {
protected:
  // init + 2 train + eval = 4 graphs in a 10-step trial.
  std::vector<std::string> train(int steps = 10, int graphs_per_step = 2) {
    return {(standin_dir() / "standin_train").string(), "--nproc_per_node", "2", "--steps_this_run",
            std::to_string(steps), "--graphs_per_step", std::to_string(graphs_per_step), "--eval_every", "5",
            "--layers", "2", "--hidden", "64",
            "--workdir", (dir() / "train").string()};
  }
  std::vector<std::string> launcher_args(const std::string& node, std::vector<std::string> ours,
                                         const std::vector<std::string>& command) {
    ours.insert(ours.begin(), "--parallel_compile_workdir=" + (dir() / ("wd-" + node)).string());
    ours.insert(ours.end(), command.begin(), command.end());
    return ours;
  }
  RunResult launch(const std::string& node, std::vector<std::string> ours, const std::vector<std::string>& command = {},
                   std::map<std::string, std::string> env = {}) {
    env["NEURON_COMPILE_CACHE_MIRROR"] = (dir() / node).string();
    return run_tool("neuron_parallel_compile", launcher_args(node, std::move(ours), command), std::move(env));
  }
  // The S3 folders of the pending entries, by key: "team/neuronxcc-.../MODULE_...".
  std::vector<std::string> entry_folders() {
    auto c = client();
    if (!c) return {};
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) {
      ADD_FAILURE() << all.error();
      return {};
    }
    std::vector<std::string> folders;
    const std::string graph = "/model.hlo_module.pb";
    for (const auto& o : all->objects)
      if (o.key.ends_with(graph)) folders.push_back(o.key.substr(0, o.key.size() - graph.size()));
    std::sort(folders.begin(), folders.end());
    return folders;
  }
  std::string first_entry_folder() {
    auto folders = entry_folders();
    return folders.empty() ? "" : folders.front();
  }
  static std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // The lock of `folder` as a compiling node of another host leaves it
  // (whose liveness cannot be told from here: only the expiry counts).
  void hold_as_another_node(const std::string& folder, std::int64_t expires_unix) {
    util::LockHolder holder;
    holder.pid = 4242;
    holder.host = "node-elsewhere";
    holder.boot_id = "0b0b0b0b-0000-0000-0000-000000000000";
    holder.start_unix = unix_now();
    holder.tool = "neuron_cc_wrapper";
    storage::LockRecord record{holder.serialize(), "token-of-node-elsewhere", expires_unix};
    auto c = client();
    ASSERT_TRUE(c);
    auto put = c->put_object(kS3TestBucket, folder + "/model.hlo_module.pb.lock", record.serialize());
    ASSERT_TRUE(put) << put.error();
  }
  // The launcher's workers started for the entry `module` (MODULE_...), from
  // its DEBUG log ("starting .../neuron_cc_wrapper compile-entry DIR ...").
  static std::size_t workers_started_for(const std::string& log, const std::string& module) {
    std::size_t n = 0;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);)
      n += line.find("starting ") != std::string::npos && line.find(" compile-entry ") != std::string::npos &&
           line.find(module) != std::string::npos;
    return n;
  }
  // Node A extracts the trial's graphs into S3 (--command collect); another
  // node holds the first of them, its lock in force for 10 minutes.
  void collect_and_hold_one(std::string& folder, std::string& module) {
    auto collected = launch("node-a", {"--command", "collect"}, train());
    ASSERT_EQ(collected.exit_code, 0) << collected.describe();
    folder = first_entry_folder();
    ASSERT_FALSE(folder.empty()) << testing::PrintToString(objects());
    module = module_of(folder);
    ASSERT_NO_FATAL_FAILURE(hold_as_another_node(folder, unix_now() + 600));
    // Older than node B's launcher by more than kPresumeClockMargin: read
    // when it takes the graphs, not presumed held (shared_graphs.hpp), so
    // its holder is named.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  // Node B's launcher, in the background: --command compile at DEBUG (whose
  // log, node-b.log, names each worker started), with a --report.
  pid_t start_compile_on_node_b(const fs::path& report) {
    return start_tool(
        "neuron_parallel_compile",
        launcher_args("node-b", {"--command", "compile", "--log_level", "DEBUG", "--report", report.string()}, {}),
        {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}}, dir() / "node-b.log");
  }
  // Waits (up to 2 minutes) until node-b's launcher log says it found
  // `module` held in S3 as it took the graphs, and waits for it there
  // ("MODULE_... is held by another host (...)", at DEBUG).
  bool launcher_found_it_held(const std::string& module) {
    return node_b_said(module + " is held by another host (pid 4242 on node-elsewhere");
  }
  // Waits (up to 2 minutes) until node-b's launcher has looked at `module`
  // in S3 itself, after taking the graphs, and found it still held
  // ("MODULE_... is still held in s3://...: the lock ...", at DEBUG).
  bool launcher_looked_and_found_it_held(const std::string& module) {
    return node_b_said(module + " is still held in s3://");
  }
  bool node_b_said(const std::string& line) {
    for (int i = 0; i < 1200; ++i) {
      if (read_text(dir() / "node-b.log").find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  static std::string module_of(const std::string& folder) { return folder.substr(folder.rfind('/') + 1); }
  // The --report record of the graph whose key names `module`.
  static nlohmann::json report_of(const fs::path& report, const std::string& module) {
    auto j = nlohmann::json::parse(read_text(report));
    for (const auto& [graph, record] : j["compilation_report"].items())
      if (graph.find(module) != std::string::npos) return record;
    ADD_FAILURE() << "no " << module << " in " << j.dump(2);
    return {};
  }
  std::size_t done_in_mirror(const std::string& node) {
    std::size_t n = 0;
    for (const auto& e : names_in(mirror_version_dir(node))) n += fs::exists(mirror_version_dir(node) / e / "model.done");
    return n;
  }
};

TEST_F(S3Launcher, ATrialOnS3IsCompiledInTheMirrorAndUploadedThenAnotherNodeDownloadsIt) {
  auto run = launch("node-a", {}, train());
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_NE(run.out.find("Extracting graphs (s3://test-bucket/team/neuronxcc-"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("4 graphs found, 0 already cached, 4 compiled, 0 failed, 0 retried"), std::string::npos)
      << run.err;
  EXPECT_EQ(objects(), done_entries(4)); // no lock left, every entry whole
  EXPECT_EQ(done_in_mirror("node-a"), 4u);

  // Node B: every result is in S3 already.
  auto other = launch("node-b", {}, train());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_NE(other.err.find("4 result(s) already in s3://test-bucket/team downloaded into " +
                           (dir() / "node-b" / "s3" / "test-bucket" / "team").string()),
            std::string::npos)
      << other.err;
  EXPECT_NE(other.err.find("4 graphs found, 4 already cached, 0 compiled"), std::string::npos) << other.err;
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
  for (const auto& e : names_in(mirror_version_dir("node-a")))
    EXPECT_EQ(read_text(mirror_version_dir("node-b") / e / "model.neff"),
              read_text(mirror_version_dir("node-a") / e / "model.neff"))
        << e;

  // Node B's training run then compiles nothing, with S3 gone: its mirror serves.
  ASSERT_NO_FATAL_FAILURE(take_s3_away());
  std::vector<std::string> command = train();
  command.erase(command.begin());
  auto training = run_tool("standin_train", command, {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  ASSERT_EQ(training.exit_code, 0) << training.describe();
  EXPECT_EQ(train_total_field(training.out, "jit_compiles"), 0) << training.out;
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(S3Launcher, CommandCompileTakesThePendingGraphsOfS3) {
  // Node A only extracts: S3 then holds 4 pending graphs.
  auto collected = launch("node-a", {"--command", "collect"}, train());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_NE(collected.out.find("collected 4 graph(s) into " + (dir() / "node-a" / "s3" / "test-bucket" / "team").string()),
            std::string::npos)
      << collected.out;
  auto pending = objects();
  EXPECT_EQ(pending.size(), 8u); // graph and flags of each
  EXPECT_EQ(precompile_records(), 0u) << "a collect compiles nothing: no pre-compile to record";
  // The scan counts S3's entries, not a mirror's: node C has none.
  EXPECT_EQ(launch("node-c", {"--command", "scan"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 0 done, 4 pending, 0 locked (s3://test-bucket/team)\n");

  // Node B compiles them from S3 without a trial.
  auto run = launch("node-b", {"--command", "compile"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(precompile_records(), 1u) << "recorded where every host sees it";
  // Another node reads it there: nothing compiled after it; the entries are S3's.
  auto misses = run_tool("neuron_cache", {"misses", "--json"}, {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-c").string()}});
  ASSERT_EQ(misses.exit_code, 0) << misses.describe();
  auto listed = nlohmann::json::parse(misses.out);
  EXPECT_EQ(listed["entries"], 4);
  EXPECT_EQ(listed["misses"].size(), 0u);
  ASSERT_EQ(listed["precompile"].size(), 1u);
  EXPECT_EQ(listed["precompile"][0]["graphs"], 4);
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(objects(), done_entries(4));
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
  EXPECT_EQ(launch("node-b", {"--command", "scan-with-failed"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 4 done, 0 failed, 0 pending, 0 locked (s3://test-bucket/team)\n");
  // Nothing left to do the next time.
  auto again = launch("node-c", {"--command", "compile"});
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 4u);
}

// The tasks of a Slurm step on an S3 cache: a graph one task timed out on
// (its last attempt) is failed for the step. Its record goes up to the
// shared entry before its lock goes; the next task to take the lock reads
// it (the entry has a record and no result) and counts the graph failed
// without compiling it. The next step compiles it again.
TEST_F(S3Launcher, AGraphATaskOfTheStepTimedOutOnIsNotCompiledAgainByAnother) {
  auto collected = launch("node-a", {"--command", "collect"}, train());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  // A graph the fault strikes alone.
  const auto folders = entry_folders();
  std::vector<std::string> graphs;
  for (const auto& f : folders)
    graphs.push_back(read_text(dir() / "node-a" / "s3" / "test-bucket" / f / "model.hlo_module.pb"));
  const std::size_t faulty = first_uniquely_marked(graphs);
  ASSERT_LT(faulty, graphs.size()) << "no graph with a module marker of its own";
  const std::string folder = folders[faulty];
  const std::string module = module_of(folder);
  const std::string first_line = graph_module_marker(graphs[faulty]);
  auto task = [&](const std::string& node, int index, const std::string& step) {
    return std::map<std::string, std::string>{
        {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", step}, {"SLURM_PROCID", std::to_string(index)},
        {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURMD_NODENAME", node}, {"STANDIN_CC_FAULT", "hang"},
        {"STANDIN_CC_FAULT_MATCH", first_line}};
  };
  auto zero = launch("node-b", {"--command", "compile", "--compile-timeout", "1"}, {}, task("node-b", 0, "0"));
  EXPECT_EQ(zero.exit_code, 1) << zero.describe();
  EXPECT_EQ(compiles(), 4u);
  auto one = launch("node-c", {"--command", "compile", "--compile-timeout", "1"}, {}, task("node-c", 1, "0"));
  EXPECT_EQ(one.exit_code, 1) << one.describe();
  EXPECT_EQ(compiles(), 4u) << "compiled again by another task of the step";
  EXPECT_NE(one.err.find("FAILED " + module + " (timed out after 1.0s in task 0/2 node-b (slurm step 7.0))"),
            std::string::npos)
      << one.err;
  // The next step of the job is another run.
  auto next = launch("node-c", {"--command", "compile", "--compile-timeout", "1"}, {}, task("node-c", 1, "1"));
  EXPECT_EQ(next.exit_code, 1) << next.describe();
  EXPECT_EQ(compiles(), 5u);
}

// A launcher's worker on an entry its mirror does not have yet (--command
// compile leaves a graph only pending in S3 there until it is compiled):
// it fetches graph and flags under the entry's lock in S3 and compiles;
// with the graph gone from S3 too, the entry reads as removed (exit 3, the
// launcher's "removed by another process"), and no empty folder is left.
TEST_F(S3Launcher, AWorkerBringsTheGraphItCompilesFromS3) {
  auto collected = launch("node-a", {"--command", "collect"}, train());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  const std::string folder = first_entry_folder();
  ASSERT_FALSE(folder.empty());
  const std::string module = module_of(folder);
  const fs::path entry = mirror_version_dir("node-b") / module;
  ASSERT_FALSE(fs::exists(entry));
  auto worker = [&](const fs::path& dir) {
    return run_tool("neuron_cc_wrapper", {"compile-entry", dir.string(), "--no-evict", "--no-wait", "--shared-cache",
                                          "s3://test-bucket/team"});
  };
  auto compiled = worker(entry);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(names_in(entry), (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb",
                                                       "model.neff", "npc-entry.json"}));
  auto c = client();
  ASSERT_TRUE(c);
  auto all = c->list_all(kS3TestBucket, {});
  ASSERT_TRUE(all) << all.error();
  std::string gone;
  bool done_there = false;
  for (const auto& o : all->objects) {
    done_there = done_there || o.key == folder + "/model.done";
    if (o.key.ends_with("/model.hlo_module.pb") && o.key != folder + "/model.hlo_module.pb") gone = o.key;
  }
  EXPECT_TRUE(done_there) << testing::PrintToString(objects());
  ASSERT_FALSE(gone.empty());
  const std::string gone_folder = gone.substr(0, gone.rfind('/'));
  ASSERT_TRUE(c->delete_object(kS3TestBucket, gone));
  ASSERT_TRUE(c->delete_object(kS3TestBucket, gone_folder + "/compile_flags.json"));
  const fs::path gone_entry = mirror_version_dir("node-b") / module_of(gone_folder);
  auto removed = worker(gone_entry);
  EXPECT_EQ(removed.exit_code, 3) << removed.describe();
  EXPECT_NE(removed.err.find("was removed by another process before it was compiled here"), std::string::npos)
      << removed.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_FALSE(fs::exists(gone_entry));
}

TEST_F(S3Launcher, TwoLaunchersAtOnceCompileEachGraphOnce) {
  const std::map<std::string, std::string> slow = {{"STANDIN_CC_BASE_MS", "400"}};
  std::vector<pid_t> launchers;
  for (const std::string node : {"node-a", "node-b"}) {
    auto env = slow;
    env["NEURON_COMPILE_CACHE_MIRROR"] = (dir() / node).string();
    launchers.push_back(start_tool("neuron_parallel_compile", launcher_args(node, {"--num_parallel", "2"}, train()),
                                   env, dir() / (node + ".log")));
  }
  for (pid_t pid : launchers) {
    auto status = util::wait_child(pid);
    EXPECT_TRUE(status.success()) << status.describe() << read_text(dir() / "node-a.log")
                                  << read_text(dir() / "node-b.log");
  }
  // Each launcher counts what it compiled itself: 4 between them.
  std::size_t compiled_by_launchers = 0;
  const std::regex summary(R"((\d+) graphs found, (\d+) already cached, (\d+) compiled,)");
  for (const std::string node : {"node-a", "node-b"}) {
    std::smatch m;
    const std::string log = read_text(dir() / (node + ".log"));
    ASSERT_TRUE(std::regex_search(log, m, summary)) << log;
    EXPECT_EQ(m[1], "4") << log;
    compiled_by_launchers += std::stoul(m[3]);
  }
  EXPECT_EQ(compiled_by_launchers, 4u) << read_text(dir() / "node-a.log") << read_text(dir() / "node-b.log");
  EXPECT_EQ(distinct_graphs_compiled(), 4u);
  EXPECT_EQ(compiles(), 4u) << "a graph was compiled twice\n" << read_text(dir() / "node-a.log") << read_text(dir() / "node-b.log");
  // Which results a launcher downloaded (and marked used) is the race's.
  EXPECT_EQ(objects(/*with_uses=*/false), done_entries(4));
  EXPECT_EQ(done_in_mirror("node-a"), 4u);
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
}

// Four hosts on one S3 cache, each launcher in a UTS and a PID namespace of
// its own (hostnames differ, pids collide) with a mirror of its own: every
// graph is compiled once between them, S3 holds every entry whole, and each
// host's mirror holds what it compiled.
TEST_F(S3Launcher, FourHostsOfTheirOwnCompileEachGraphOnce) {
  constexpr std::size_t kGraphs = 10; // init + 8 train + eval
  auto collected = launch("node-a", {"--command", "collect"}, train(10, 8));
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  ASSERT_EQ(objects().size(), 2 * kGraphs) << "graph and flags of each";
  std::vector<pid_t> launchers;
  for (int h = 0; h < 4; ++h) {
    const std::string host = "host-" + std::to_string(h);
    launchers.push_back(start_tool_on_host(
        host, "neuron_parallel_compile",
        launcher_args(host, {"--command", "compile", "--num_parallel", "2", "--report", (dir() / (host + ".json")).string()},
                      {}),
        {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / host).string()}, {"STANDIN_CC_BASE_MS", "300"}},
        dir() / (host + ".log")));
  }
  std::size_t compiled = 0;
  int split = 0; // launchers that saw others on the roll
  for (int h = 0; h < 4; ++h) {
    const std::string host = "host-" + std::to_string(h);
    auto status = util::wait_child(launchers[static_cast<std::size_t>(h)]);
    const std::string log = read_text(dir() / (host + ".log"));
    EXPECT_TRUE(status.success()) << status.describe() << "\n" << log;
    EXPECT_TRUE(log.starts_with("host " + host + " pid 1\n"))
        << "simulating a host needs `unshare --uts --pid --fork --mount-proc` (util-linux) run as root:\n" << log;
    // Each put itself on the cache's roll and split the graphs by what it
    // saw there (launcher_roll.hpp): itself and up to three others. One
    // whose looks all came before the others joined saw itself alone, which
    // it does not say; the last to join sees those still at work.
    if (std::regex_search(log, std::regex(R"([2-4] launcher\(s\) on this cache's roll: \d+ of the 10 graph\(s\) are this one's)")))
      ++split;
    auto report = nlohmann::json::parse(read_text(dir() / (host + ".json")), nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << log;
    EXPECT_EQ(report["compilation_summary"].value("total_graphs", 0u), kGraphs) << log;
    EXPECT_EQ(report["compilation_summary"].value("failed", 1u), 0u) << log;
    const std::size_t compiled_here = report["compilation_summary"].value("compiled", 0u);
    compiled += compiled_here;
    // What it compiled, and what a worker of it found done as it started;
    // not what its looks found done (--command compile downloads nothing).
    EXPECT_GE(done_in_mirror(host), compiled_here) << log;
    EXPECT_LE(done_in_mirror(host), kGraphs) << log;
  }
  EXPECT_GE(split, 1) << "no launcher saw another on the roll";
  EXPECT_EQ(compiled, kGraphs) << "the launchers' reports count each graph compiled once between them";
  EXPECT_EQ(compiles(), kGraphs);
  EXPECT_EQ(distinct_graphs_compiled(), kGraphs);
  // Nothing else: each launcher left the roll as it ended.
  EXPECT_EQ(objects(/*with_uses=*/false), done_entries(kGraphs));
}

// A host dies (SIGKILL of its PID namespace's pid 1) while it holds graphs'
// locks in S3: the survivors wait for its locks to lapse (60 s after its last
// renewal, storage::kLockTtl), take them over and compile its graphs; each
// ends with every graph done and exits 0, S3 holds every entry whole and no
// lock, and the dead launcher's place on the roll is all it leaves.
TEST_F(S3Launcher, ADeadHostsGraphsAreCompiledByTheSurvivorsWithinItsLease) {
  constexpr std::size_t kGraphs = 10; // init + 8 train + eval
  auto collected = launch("node-a", {"--command", "collect"}, train(10, 8));
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  auto host_name = [](int h) { return "host-" + std::to_string(h); };
  std::vector<pid_t> launchers;
  for (int h = 0; h < 3; ++h)
    launchers.push_back(start_tool_on_host(
        host_name(h), "neuron_parallel_compile",
        launcher_args(host_name(h),
                      {"--command", "compile", "--num_parallel", "2", "--report",
                       (dir() / (host_name(h) + ".json")).string()},
                      {}),
        {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / host_name(h)).string()}, {"STANDIN_CC_BASE_MS", "1500"}},
        dir() / (host_name(h) + ".log")));
  const pid_t doomed = host_init(launchers[0]);
  ASSERT_GT(doomed, 0) << "no namespace under unshare pid " << launchers[0];
  auto c = client();
  ASSERT_TRUE(c);
  auto locks_of_the_doomed = [&] {
    std::size_t held = 0;
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) return held;
    for (const auto& o : all->objects) {
      if (!o.key.ends_with("/model.hlo_module.pb.lock")) continue;
      auto text = c->get_object(kS3TestBucket, o.key, 1 << 16);
      if (text && *text && (*text)->find("host=" + host_name(0) + " ") != std::string::npos) ++held;
    }
    return held;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (locks_of_the_doomed() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_LT(std::chrono::steady_clock::now(), deadline) << read_text(dir() / (host_name(0) + ".log"));
  ASSERT_EQ(::kill(doomed, SIGKILL), 0);
  const auto died = std::chrono::steady_clock::now();
  EXPECT_FALSE(util::wait_child(launchers[0]).success());

  for (int h = 1; h < 3; ++h) {
    auto status = util::wait_child(launchers[static_cast<std::size_t>(h)]);
    const double after_death = std::chrono::duration<double>(std::chrono::steady_clock::now() - died).count();
    const std::string log = read_text(dir() / (host_name(h) + ".log"));
    EXPECT_TRUE(status.success()) << status.describe() << "\n" << log;
    // The protocol's bound: the dead host's lease, and the survivors' own
    // work and looks (at most 10 s apart) after it.
    EXPECT_LT(after_death, std::chrono::duration<double>(storage::kLockTtl).count() + 40) << log;
    auto report = nlohmann::json::parse(read_text(dir() / (host_name(h) + ".json")), nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << log;
    EXPECT_EQ(report["compilation_summary"].value("total_graphs", 0u), kGraphs) << log;
    EXPECT_EQ(report["compilation_summary"].value("failed", 1u), 0u) << log;
    for (const auto& [graph, outcome] : report["compilation_report"].items())
      EXPECT_TRUE(outcome["status"] == "compiled" || outcome["status"] == "compiled_elsewhere")
          << graph << ": " << outcome.dump() << "\n" << log;
  }
  EXPECT_EQ(distinct_graphs_compiled(), kGraphs);
  auto left = objects(/*with_uses=*/false);
  std::erase_if(left, [](const std::string& key) { return key.starts_with("team/.npc/launchers/host-0."); });
  EXPECT_EQ(left, done_entries(kGraphs));
}

// A launcher killed with -9 leaves its record on the roll, fresh for a
// minute: the launcher that starts next counts it, and takes the graphs
// that are the dead one's share after its own. Every graph is compiled,
// once, and the dead record is left to age off the roll.
TEST_F(S3Launcher, ADeadLaunchersShareOnTheRollIsStillCompiled) {
  constexpr std::size_t kGraphs = 10; // init + 8 train + eval
  auto collected = launch("node-a", {"--command", "collect"}, train(10, 8));
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  auto c = client();
  ASSERT_TRUE(c);
  const std::string dead = "team/.npc/launchers/gone-host.4242.0badf00d.json";
  ASSERT_TRUE(c->put_object(kS3TestBucket, dead, R"({"launcher":"gone-host.4242.0badf00d"})"));
  auto ran = launch("node-b", {"--command", "compile", "--num_parallel", "2"}, {});
  ASSERT_EQ(ran.exit_code, 0) << ran.describe();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      ran.err, m, std::regex(R"(2 launcher\(s\) on this cache's roll: (\d+) of the 10 graph\(s\) are this one's)")))
      << ran.describe();
  EXPECT_LT(std::stoul(m[1]), kGraphs) << "the dead launcher owns some: " << ran.describe();
  EXPECT_EQ(compiles(), kGraphs) << ran.describe();
  EXPECT_EQ(distinct_graphs_compiled(), kGraphs);
  std::vector<std::string> expected = done_entries(kGraphs);
  expected.push_back(dead);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(objects(/*with_uses=*/false), expected);
}

// Another node compiles one graph (its lock live for 10 minutes) before the
// launcher starts: the launcher sees the lock as it takes the graphs,
// compiles the other three, and waits, looking at S3 itself; the result the
// other node publishes once a look of the launcher found the lock still held
// counts as compiled there. No worker ran for that graph (one used to, only
// to meet the lock).
TEST_F(S3Launcher, AGraphAnotherNodeHoldsIsWaitedForInS3AndCountedAsCompiledThere) {
  std::string folder, module;
  ASSERT_NO_FATAL_FAILURE(collect_and_hold_one(folder, module));
  const fs::path report = dir() / "report.json";
  pid_t launcher = start_compile_on_node_b(report);
  // The other node's result lands while the launcher waits: once it has
  // looked at S3 and found the lock still held, however long a loaded
  // machine took to get there. NEFF, marker, then the lock released, in a
  // compile's order.
  ASSERT_TRUE(launcher_found_it_held(module)) << read_text(dir() / "node-b.log");
  ASSERT_TRUE(launcher_looked_and_found_it_held(module)) << read_text(dir() / "node-b.log");
  const std::string neff = "NEFF compiled by node-elsewhere\n";
  {
    auto c = client();
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->put_object(kS3TestBucket, folder + "/model.neff", neff));
    ASSERT_TRUE(c->put_object(kS3TestBucket, folder + "/model.done", ""));
    ASSERT_TRUE(c->delete_object(kS3TestBucket, folder + "/model.hlo_module.pb.lock"));
  }
  const auto published = std::chrono::steady_clock::now();
  auto status = util::wait_child(launcher);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - published).count();
  const std::string log = read_text(dir() / "node-b.log");
  ASSERT_TRUE(status.success()) << status.describe() << log;
  EXPECT_EQ(compiles(), 3u) << log; // the other three; not the held one
  EXPECT_EQ(distinct_graphs_compiled(), 3u);
  EXPECT_EQ(workers_started_for(log, module), 0u) << log;
  // --command compile, as on a compile farm, leaves the other node's
  // result in S3: the mirror has the three compiled here, and never had
  // the held graph's files (left in S3 until a compile needs them).
  EXPECT_FALSE(fs::exists(mirror_version_dir("node-b") / module)) << log;
  EXPECT_EQ(done_in_mirror("node-b"), 3u);
  EXPECT_NE(log.find("compiled by another node: " + module), std::string::npos) << log;
  auto record = report_of(report, module);
  EXPECT_EQ(record["status"], "compiled_elsewhere") << record.dump();
  EXPECT_EQ(record["attempts"], 0) << record.dump();
  // Seen within the poll's ceiling of its landing (10 s:
  // kHeldElsewhereMaxPollSeconds), with room for a loaded machine.
  EXPECT_LT(took, 10 + 5) << log;
}

// Another node holds a graph and dies once the launcher has found its lock:
// the lock, no longer renewed, expires 2 s later. The launcher, waiting for
// it, then compiles the graph itself: one worker for it, which took the
// expired lock over. The death waits for the launcher to find the lock,
// however long a loaded machine takes to get there.
TEST_F(S3Launcher, AGraphWhoseRemoteLockExpiresIsCompiledByTheWaitingLauncher) {
  std::string folder, module;
  ASSERT_NO_FATAL_FAILURE(collect_and_hold_one(folder, module));
  const fs::path report = dir() / "report.json";
  pid_t launcher = start_compile_on_node_b(report);
  ASSERT_TRUE(launcher_found_it_held(module)) << read_text(dir() / "node-b.log");
  const std::int64_t expires = unix_now() + 2;
  ASSERT_NO_FATAL_FAILURE(hold_as_another_node(folder, expires));

  auto status = util::wait_child(launcher);
  const std::string log = read_text(dir() / "node-b.log");
  ASSERT_TRUE(status.success()) << status.describe() << log;
  EXPECT_GE(unix_now(), expires); // it did wait for the expiry
  EXPECT_EQ(compiles(), 4u) << log;
  EXPECT_EQ(distinct_graphs_compiled(), 4u);
  EXPECT_EQ(workers_started_for(log, module), 1u) << log;
  auto record = report_of(report, module);
  EXPECT_EQ(record["status"], "compiled") << record.dump();
  EXPECT_EQ(record["attempts"], 1) << record.dump();
  EXPECT_EQ(objects(), done_entries(4)); // the expired lock taken over and released
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
}

// An S3 cache that cannot be used is found before the trial, in one line
// that says why and what to do (exit 3): the trial, which would have
// written `trial-ran`, never starts, and no launcher joins the roll.
class S3LauncherUnusableCache : public S3Launcher {
protected:
  RunResult launch_trial() {
    return launch("node-a", {}, {"/bin/sh", "-c", "touch '" + (dir() / "trial-ran").string() + "'"});
  }
  void expect_refused_before_the_trial(const RunResult& run, const std::string& line) {
    EXPECT_EQ(run.exit_code, 3) << run.describe();
    EXPECT_EQ(run.err, "neuron_parallel_compile: error: " + line + "\n");
    EXPECT_FALSE(fs::exists(dir() / "trial-ran")) << "the trial ran";
    EXPECT_EQ(compiles(), 0u);
  }
};

TEST_F(S3LauncherUnusableCache, AWrongSecretKeyIsRefusedBeforeTheTrial) {
  env_["AWS_SECRET_ACCESS_KEY"] = server_.secret_key() + "x";
  expect_refused_before_the_trial(
      launch_trial(), std::string("the cache ") + kUrl + " cannot be used: S3 refused the credentials for ListObjectsV2 on " +
                          kUrl + "/ at " + s3_endpoint() +
                          " (403 SignatureDoesNotMatch): the access key or the secret key is wrong (AWS_ACCESS_KEY_ID, "
                          "AWS_SECRET_ACCESS_KEY, AWS_PROFILE)");
  EXPECT_EQ(objects(), std::vector<std::string>{}) << "nothing of the run is in the bucket";
}

TEST_F(S3LauncherUnusableCache, ABucketThatDoesNotExistIsRefusedBeforeTheTrial) {
  env_["NEURON_CC_FLAGS"] = "--cache_dir=s3://no-such-bucket/team";
  expect_refused_before_the_trial(
      launch_trial(), "the cache s3://no-such-bucket/team cannot be used: S3 bucket no-such-bucket does not exist at " +
                          s3_endpoint() +
                          " (404 NoSuchBucket); create it, or name an existing one in NEURON_COMPILE_CACHE_URL or in "
                          "--cache_dir of NEURON_CC_FLAGS");
}

TEST_F(S3LauncherUnusableCache, AnEndpointThatDoesNotAnswerIsRefusedBeforeTheTrial) {
  take_s3_away();
  expect_refused_before_the_trial(
      launch_trial(), std::string("the cache ") + kUrl + " cannot be used: cannot reach S3 endpoint " + s3_endpoint() +
                          ": Connection refused (after 5 attempts); check the endpoint (AWS_ENDPOINT_URL_S3, "
                          "AWS_ENDPOINT_URL, AWS_REGION) and that this host reaches it");
}

TEST_F(S3Launcher, TheGraphsOfAnotherS3CacheAreRefusedByName) {
  // The training script sets its own cache inside, as scripts do: another
  // prefix than the launcher's.
  std::vector<std::string> command = train();
  command.insert(command.end(), {"--script_cache_dir", "s3://test-bucket/elsewhere"});
  auto run = launch("node-a", {}, command);
  EXPECT_EQ(run.exit_code, 1) << run.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_NE(run.err.find("the trial extracted 4 graph(s) and none could be taken: 's3://test-bucket/elsewhere/"
                         "neuronxcc-"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("): not in the shared cache s3://test-bucket/team (the launcher "
                         "compiles into the cache NEURON_COMPILE_CACHE_URL or --cache_dir names)"),
            std::string::npos)
      << run.err;
}

} // namespace
} // namespace npc::test
