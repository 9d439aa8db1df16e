// Crash consistency: SIGKILL the compile entry, a worker, the launcher and an
// eviction at random points (seeded, printed), and after every kill check,
// by reading the cache directly, that no done entry has a NEFF failing its
// integrity record, that no reader was served a partial NEFF, that
// `neuron_cache verify` passes, and that the next run finishes every graph,
// taking over the locks the killed process left behind.
//
// Short form by default; NPC_LONG=1 runs the long form (over 200 kill points).

#include <algorithm>
#include <csignal>
#include <thread>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>

#include "reliability.hpp"

namespace npc::reltest {
namespace {

using namespace std::chrono_literals;
using npc::test::program;
using npc::test::RunOptions;

class CrashTest : public npc::test::CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    become_subreaper();
    seed_ = test_seed();
    rng_.seed(seed_);
  }
  void TearDown() override {
    kill_all_descendants();
    CacheTest::TearDown();
  }

  std::vector<std::string> wrapper_compile(const Graph& g, const fs::path& out) const {
    return {program("neuron_cc_wrapper").string(), "compile", "--graph", g.path.string(), "--output", out.string()};
  }

  // NEURON_CC_FLAGS with a size limit that keeps eviction busy.
  std::string flags(const std::string& extra = "") const {
    return "--cache_dir=" + (dir() / "c").string() + (extra.empty() ? "" : " " + extra);
  }

  // The next eviction pass runs at once instead of a minute after the last.
  void expire_eviction_stamp() const {
    fs::path stamp = cache_root() / ".npc" / "last-eviction";
    std::error_code ec;
    if (fs::exists(stamp, ec)) std::ignore = util::set_mtime(stamp, std::chrono::system_clock::now() - 1h);
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin() { return uniform(0, 1) == 1; }

  // After a kill: the cache read directly, then `neuron_cache verify`.
  void check_consistent(const std::string& when, bool nothing_running) {
    auto check = check_cache(cache_root(), expected_, nothing_running);
    EXPECT_TRUE(check.problems.empty()) << when << ": " << check.describe();
    auto verify = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(verify.exit_code, 0) << when << ": " << verify.describe();
    EXPECT_NE(verify.out.find(" 0 bad"), std::string::npos) << when << ": " << verify.out;
    ++checks_;
  }

  // A reader's output: absent, or exactly the graph's NEFF (never partial).
  void check_served(const std::string& when, const Graph& g, const fs::path& out, int exit_code) {
    std::error_code ec;
    if (!fs::exists(out, ec)) {
      EXPECT_NE(exit_code, 0) << when << ": exit 0 but no NEFF at " << out;
      return;
    }
    EXPECT_EQ(file_sha256(out), g.neff_sha256) << when << ": partial or wrong NEFF served at " << out;
    ++served_;
  }

  // The next run finishes every graph: each is served whole, exit 0.
  void complete_with_wrapper(const std::string& when, const std::vector<Graph>& graphs,
                             const std::map<std::string, std::string>& extra = {}) {
    for (const auto& g : graphs) {
      fs::path out = dir() / "complete" / (g.path.stem().string() + ".neff");
      fs::create_directories(out.parent_path());
      fs::remove(out);
      auto r = run(wrapper_compile(g, out), options(extra));
      ASSERT_EQ(r.exit_code, 0) << when << ": the next run did not finish " << g.path << "\n" << r.describe();
      check_served(when + " (next run)", g, out, r.exit_code);
    }
  }

  void add_expected(const std::vector<Graph>& graphs) {
    for (const auto& g : graphs) expected_[g.sha256] = g.neff_sha256;
  }

  std::uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::map<std::string, std::string> expected_;
  std::uint64_t kill_points_ = 0, ended_before_kill_ = 0, served_ = 0, checks_ = 0, orphans_killed_ = 0;
};

// The compile entry (`neuron_cc_wrapper compile`, as a framework calls it)
// killed while it stores the graph, waits for the lock, compiles, publishes,
// copies the NEFF out, or evicts (the cache is kept over its size limit and
// the TTL is 0, so every compile's eviction pass deletes entries). A second
// rank asks for the same graph at the same time and must be served whole.
TEST_F(CrashTest, KillCompileEntryAtRandomPoints) {
  const auto target = static_cast<std::uint64_t>(scaled(10, 80));
  int iterations = 0;
  for (int it = 0; kill_points_ < target && it < 3 * static_cast<int>(target); ++it, ++iterations) {
    std::string when = "iteration " + std::to_string(it);
    auto graphs = make_graphs(dir() / "g" / std::to_string(it), "jit" + std::to_string(it), 3,
                              static_cast<std::size_t>(uniform(2000, 60000)), rng_);
    add_expected(graphs);
    int cost_ms = uniform(10, 60);
    std::map<std::string, std::string> env = {
        {"NEURON_CC_FLAGS", flags("--cache_size=" + std::to_string(uniform(20000, 200000)) + " --cache_ttl=0")},
        {"STANDIN_CC_BASE_MS", std::to_string(cost_ms)}};
    expire_eviction_stamp();
    const Graph& target = graphs[static_cast<std::size_t>(uniform(0, 1))];
    fs::path out_dir = dir() / "out" / std::to_string(it);
    fs::create_directories(out_dir);
    auto victim = start(wrapper_compile(target, out_dir / "victim.neff"), options(env), out_dir / "victim.log");
    auto peer = start(wrapper_compile(target, out_dir / "peer.neff"), options(env), out_dir / "peer.log");
    auto delay = std::chrono::microseconds(uniform(0, (cost_ms + 40) * 1000));
    auto ended = kill_after(victim, delay);
    if (ended.killed) {
      ++kill_points_;
    } else {
      ++ended_before_kill_;
      EXPECT_EQ(ended.exit_code, 0) << when << ": " << ended.output;
    }
    // A killed compile entry leaves its output absent or whole, never partial.
    check_served(when + " (victim)", target, out_dir / "victim.neff", ended.killed ? 1 : ended.exit_code);
    auto peer_end = wait_for(peer, 60s);
    EXPECT_EQ(peer_end.exit_code, 0) << when << ": the other rank failed: " << peer_end.output;
    check_served(when + " (other rank)", target, out_dir / "peer.neff", peer_end.exit_code);
    // The orphaned compiler is ended now, or left to finish on its own.
    if (coin()) {
      kill_all_descendants();
      ++orphans_killed_;
    }
    check_consistent(when + " (delay " + std::to_string(delay.count()) + " us)", true);
    complete_with_wrapper(when, graphs, env);
    if (HasFailure()) break;
  }
  kill_all_descendants();
  // Whatever lock files the kills left are free: clear-locks takes them all.
  auto cleared = run_tool("neuron_cache", {"clear-locks"});
  EXPECT_EQ(cleared.exit_code, 0) << cleared.describe();
  EXPECT_EQ(cleared.out.find("held by running processes"), std::string::npos) << cleared.out;
  auto final_check = check_cache(cache_root(), expected_, true);
  EXPECT_TRUE(final_check.problems.empty()) << final_check.describe();
  EXPECT_EQ(final_check.lock_files, 0u) << final_check.describe();
  EXPECT_GE(kill_points_, target) << "only " << kill_points_ << " of the " << target << " kills landed ("
                                  << ended_before_kill_ << " compile entries ended before their kill point)";
  record_figures({{"kill_points", kill_points_},
                  {"ended_before_kill", ended_before_kill_},
                  {"neffs_served_and_checked", served_},
                  {"consistency_checks", checks_},
                  {"processes_raced", static_cast<std::uint64_t>(iterations) * 2}});
}

// A launcher's worker (`neuron_cc_wrapper compile-entry DIR`) killed at
// random points, while a second worker waits for the same entry's lock.
TEST_F(CrashTest, KillWorkerAtRandomPoints) {
  const auto target = static_cast<std::uint64_t>(scaled(8, 50));
  int iterations = 0;
  for (int it = 0; kill_points_ < target && it < 3 * static_cast<int>(target); ++it, ++iterations) {
    std::string when = "iteration " + std::to_string(it);
    auto graphs = make_graphs(dir() / "g" / std::to_string(it), "worker" + std::to_string(it), 3,
                              static_cast<std::size_t>(uniform(2000, 40000)), rng_);
    add_expected(graphs);
    // Extraction, as the trial run does it: the entries are left pending.
    std::vector<fs::path> entries;
    for (const auto& g : graphs) {
      auto r = run(wrapper_compile(g, dir() / "placeholder.neff"), options({{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}));
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      auto key = run_tool("neuron_cc_wrapper", {"key", "--graph", g.path.string()});
      entries.emplace_back(key.out.substr(0, key.out.find('\n')));
      ASSERT_TRUE(fs::is_directory(entries.back())) << key.describe();
    }
    int cost_ms = uniform(10, 60);
    std::map<std::string, std::string> env = {
        {"NEURON_CC_FLAGS", flags("--cache_size=" + std::to_string(uniform(20000, 200000)) + " --cache_ttl=0")},
        {"STANDIN_CC_BASE_MS", std::to_string(cost_ms)}};
    expire_eviction_stamp();
    std::size_t target = static_cast<std::size_t>(uniform(0, 2));
    std::vector<std::string> victim_argv = {program("neuron_cc_wrapper").string(), "compile-entry",
                                            entries[target].string()};
    if (coin()) victim_argv.emplace_back("--no-wait");
    if (coin()) victim_argv.emplace_back("--no-evict");
    fs::path logs = dir() / "logs" / std::to_string(it);
    fs::create_directories(logs);
    auto victim = start(victim_argv, options(env), logs / "victim.log");
    auto peer = start({program("neuron_cc_wrapper").string(), "compile-entry", entries[target].string(), "--no-evict"},
                      options(env), logs / "peer.log");
    auto delay = std::chrono::microseconds(uniform(0, (cost_ms + 30) * 1000));
    auto ended = kill_after(victim, delay);
    if (ended.killed) ++kill_points_;
    else ++ended_before_kill_;
    auto peer_end = wait_for(peer, 60s);
    // The peer compiles it, finds it compiled, or (the victim's eviction
    // having removed the entry first, or while the peer waited for the
    // victim's lock) finds no entry: never a failure cached.
    EXPECT_TRUE(peer_end.exit_code == 0 || peer_end.output.find("no cache entry at") != std::string::npos ||
                peer_end.output.find("has no model.hlo_module.pb") != std::string::npos ||
                peer_end.output.find("was removed by another process before it was compiled here") !=
                    std::string::npos)
        << when << ": " << peer_end.output;
    if (coin()) {
      kill_all_descendants();
      ++orphans_killed_;
    }
    check_consistent(when, true);
    // The next run: the launcher compiles whatever is pending, then every
    // graph is served.
    auto next = run_tool("neuron_parallel_compile", {"--command", "compile", "--parallel_compile_workdir",
                                                     (dir() / "w").string()}, env);
    EXPECT_EQ(next.exit_code, 0) << when << ": " << next.describe();
    complete_with_wrapper(when, graphs, env);
    if (HasFailure()) break;
  }
  kill_all_descendants();
  EXPECT_GE(kill_points_, 1u) << "no kill landed: all " << ended_before_kill_
                              << " workers ended before their kill point, so no crash was tested";
  record_figures({{"kill_points", kill_points_},
                  {"ended_before_kill", ended_before_kill_},
                  {"neffs_served_and_checked", served_},
                  {"consistency_checks", checks_},
                  {"processes_raced", static_cast<std::uint64_t>(iterations) * 2}});
}

// The launcher's workers killed by SIGKILL (what the OOM killer sends) while
// the launcher runs: it must retry them and still finish every graph.
TEST_F(CrashTest, KillWorkersUnderARunningLauncher) {
  const int iterations = scaled(2, 15);
  std::uint64_t workers_killed = 0;
  // What the launcher reports for a worker that ended by our SIGKILL: the
  // count of kills that landed (a kill sent to a worker that was just ending
  // finds no one, or a report already written).
  const std::string kKilledWorker = "(neuron_cc_wrapper killed by signal SIGKILL)";
  for (int it = 0; it < iterations; ++it) {
    std::string when = "iteration " + std::to_string(it);
    auto graphs = make_graphs(dir() / "g" / std::to_string(it), "pool" + std::to_string(it), 6, 4000, rng_);
    add_expected(graphs);
    for (const auto& g : graphs) {
      auto r = run(wrapper_compile(g, dir() / "placeholder.neff"), options({{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}));
      ASSERT_EQ(r.exit_code, 0) << r.describe();
    }
    std::map<std::string, std::string> env = {{"STANDIN_CC_BASE_MS", "150"}};
    auto launcher = start({program("neuron_parallel_compile").string(), "--command", "compile", "--num_parallel", "2",
                           "--parallel_compile_workdir", (dir() / "w").string()},
                          options(env), dir() / ("launcher." + std::to_string(it) + ".log"));
    // Kill up to two workers, each at a random moment of its compile.
    int kills = 0;
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (kills < 2 && alive(launcher.pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(20, 120)));
      std::vector<pid_t> workers;
      for (pid_t p : children_of(launcher.pid))
        if (cmdline_of(p).find("compile-entry") != std::string::npos) workers.push_back(p);
      if (workers.empty()) continue;
      pid_t victim = workers[static_cast<std::size_t>(uniform(0, static_cast<int>(workers.size()) - 1))];
      util::kill_process_group(victim, SIGKILL);
      ++kills;
    }
    auto ended = wait_for(launcher, 60s);
    EXPECT_EQ(ended.exit_code, 0) << when << ": the launcher did not finish after its workers were killed:\n"
                                  << ended.output;
    int landed = 0;
    for (auto at = ended.output.find(kKilledWorker); at != std::string::npos;
         at = ended.output.find(kKilledWorker, at + 1))
      ++landed;
    EXPECT_LE(landed, kills) << when << ": more workers killed than we killed:\n" << ended.output;
    workers_killed += static_cast<std::uint64_t>(landed);
    kill_points_ += static_cast<std::uint64_t>(landed);
    if (landed > 0) {
      EXPECT_NE(ended.output.find("retrying"), std::string::npos) << ended.output;
    }
    kill_all_descendants();
    check_consistent(when, true);
    auto check = check_cache(cache_root(), expected_, true);
    EXPECT_EQ(check.pending + check.failed, 0u) << check.describe();
    complete_with_wrapper(when, graphs);
    if (HasFailure()) break;
  }
  EXPECT_GE(workers_killed, 1u) << "no worker was seen killed in " << iterations
                                 << " runs: the launcher never reported a worker ended by SIGKILL";
  record_figures({{"kill_points", kill_points_},
                  {"workers_killed_under_launcher", workers_killed},
                  {"consistency_checks", checks_},
                  {"neffs_served_and_checked", served_}});
}

// The launcher itself killed at random points of a whole run: the trial in
// extraction mode, collecting, compiling with two workers, the report. The
// workers it leaves are killed too, or left to finish on their own. The next
// launcher run must finish, and then the training script must find every
// graph in the cache (it checks each NEFF against the graph it sent).
TEST_F(CrashTest, KillLauncherAtRandomPoints) {
  const auto target = static_cast<std::uint64_t>(scaled(8, 50));
  auto launcher_argv = [&](int hidden, const fs::path& workdir) {
    return std::vector<std::string>{program("neuron_parallel_compile").string(),
                                    "--num_parallel", "2", "--parallel_compile_workdir", (dir() / "w").string(),
                                    "--", (npc::test::standin_dir() / "standin_train").string(),
                                    "--steps_this_run", "3", "--graphs_per_step", "2", "--layers", "2",
                                    "--hidden", std::to_string(hidden), "--eval_every", "2",
                                    "--workdir", workdir.string()};
  };
  std::map<std::string, std::string> env = {{"STANDIN_CC_BASE_MS", "30"}};
  // Calibration: how long an undisturbed run takes here.
  double calibrated_ms = 0;
  {
    auto t0 = std::chrono::steady_clock::now();
    auto r = run(launcher_argv(8, dir() / "t-cal"), options(env));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    calibrated_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ calibrate] an undisturbed launcher run takes " << calibrated_ms << " ms" << std::endl;
  }
  std::uint64_t left_running = 0;
  for (int it = 0; kill_points_ < target && it < 3 * static_cast<int>(target); ++it) {
    std::string when = "iteration " + std::to_string(it);
    int hidden = 16 + 8 * it; // new graphs every time
    fs::path workdir = dir() / "t" / std::to_string(it);
    auto victim = start(launcher_argv(hidden, workdir), options(env), dir() / ("launcher." + std::to_string(it) + ".log"));
    auto delay = std::chrono::microseconds(uniform(0, static_cast<int>(calibrated_ms * 900)));
    auto ended = kill_after(victim, delay);
    if (ended.killed) ++kill_points_;
    else {
      ++ended_before_kill_;
      EXPECT_EQ(ended.exit_code, 0) << ended.output;
    }
    bool orphans = !descendants_of(::getpid()).empty();
    bool kill_orphans = coin();
    if (kill_orphans) {
      kill_all_descendants();
      ++orphans_killed_;
    } else if (orphans) {
      ++left_running;
    }
    // With workers left running, their locks are legitimately held.
    check_consistent(when + " (delay " + std::to_string(delay.count()) + " us)", kill_orphans || !orphans);
    auto next = run(launcher_argv(hidden, workdir), options(env));
    EXPECT_EQ(next.exit_code, 0) << when << ": the next launcher run did not finish\n" << next.describe();
    // The real run: every graph is a cache hit, and every NEFF is the graph's.
    auto train = run({(npc::test::standin_dir() / "standin_train").string(), "--steps_this_run", "3",
                      "--graphs_per_step", "2", "--layers", "2", "--hidden", std::to_string(hidden),
                      "--eval_every", "2", "--workdir", (workdir.string() + "-real")},
                     options(env));
    EXPECT_EQ(train.exit_code, 0) << when << ": " << train.describe();
    EXPECT_NE(train.out.find("jit_compiles=0 "), std::string::npos) << when << ": " << train.out;
    kill_all_descendants();
    check_consistent(when + " (after the next run)", true);
    if (HasFailure()) break;
  }
  EXPECT_GE(kill_points_, 1u) << "no kill landed: all " << ended_before_kill_
                              << " launchers ended before their kill point, so no crash was tested";
  record_figures({{"kill_points", kill_points_},
                  {"ended_before_kill", ended_before_kill_},
                  {"orphaned_workers_left_running", left_running},
                  {"consistency_checks", checks_}});
}

// An eviction (`neuron_cache prune`) killed at random points while a reader
// asks for graphs: an entry is there whole or not at all; the next eviction
// empties what the killed one left in the trash.
TEST_F(CrashTest, KillEvictionAtRandomPoints) {
  const auto target = static_cast<std::uint64_t>(scaled(6, 40));
  auto graphs = make_graphs(dir() / "g", "evict", 24, 3000, rng_);
  add_expected(graphs);
  complete_with_wrapper("setup", graphs);
  fs::path snapshot = dir() / "snapshot";
  fs::copy(dir() / "c", snapshot, fs::copy_options::recursive);
  std::uint64_t total_bytes = 0;
  for (const auto& e : entries())
    for (const auto& f : fs::directory_iterator(e)) total_bytes += f.is_regular_file() ? f.file_size() : 0;
  // Calibration: how long an undisturbed prune of everything takes.
  double calibrated_ms = 0;
  {
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_tool("neuron_cache", {"prune", "--max-size", "0", "--ttl", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    calibrated_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  for (int it = 0; kill_points_ < target && it < 4 * static_cast<int>(target); ++it) {
    std::string when = "iteration " + std::to_string(it);
    fs::remove_all(dir() / "c");
    fs::copy(snapshot, dir() / "c", fs::copy_options::recursive);
    // Random ages, so the order of deletion differs each time.
    for (const auto& e : entries())
      std::ignore = util::set_mtime(e, std::chrono::system_clock::now() - std::chrono::hours(uniform(1, 1000)));
    std::string limit = std::to_string(total_bytes * static_cast<std::uint64_t>(uniform(0, 90)) / 100);
    auto victim = start({program("neuron_cache").string(), "prune", "--max-size", limit, "--ttl", "0"}, options(),
                        dir() / "prune.log");
    const Graph& asked = graphs[static_cast<std::size_t>(uniform(0, 23))];
    auto reader = start(wrapper_compile(asked, dir() / "reader.neff"), options(), dir() / "reader.log");
    auto delay = std::chrono::microseconds(uniform(0, static_cast<int>(calibrated_ms * 900)));
    auto ended = kill_after(victim, delay);
    if (ended.killed) ++kill_points_;
    else ++ended_before_kill_;
    auto read = wait_for(reader, 60s);
    EXPECT_EQ(read.exit_code, 0) << when << ": " << read.output;
    check_served(when + " (reader)", asked, dir() / "reader.neff", read.exit_code);
    fs::remove(dir() / "reader.neff");
    check_consistent(when + " (delay " + std::to_string(delay.count()) + " us)", true);
    // The next eviction finishes the job and empties the trash.
    auto again = run_tool("neuron_cache", {"prune", "--max-size", limit, "--ttl", "0"});
    EXPECT_EQ(again.exit_code, 0) << again.describe();
    auto after = check_cache(cache_root(), expected_, true);
    EXPECT_EQ(after.trash, 0u) << when << ": " << after.describe();
    // The next run: a sample of the graphs here, every one at the end.
    std::vector<Graph> sample;
    for (const auto& g : graphs)
      if (uniform(0, 3) == 0) sample.push_back(g);
    complete_with_wrapper(when, kill_points_ >= target ? graphs : sample);
    if (HasFailure()) break;
  }
  EXPECT_GE(kill_points_, 1u) << "no kill landed: all " << ended_before_kill_
                              << " prunes ended before their kill point, so no crash was tested";
  record_figures({{"kill_points", kill_points_},
                  {"ended_before_kill", ended_before_kill_},
                  {"neffs_served_and_checked", served_},
                  {"consistency_checks", checks_}});
}

// ---- Ctrl-C -------------------------------------------------------------------

class InterruptTest : public CrashTest {};

// Ctrl-C reaches the launcher's process group: it stops its workers and their
// compilers within the grace period, exits 130, caches no failure, and the
// next run compiles everything.
TEST_F(InterruptTest, SigintStopsTheLauncherAndCachesNoFailure) {
  auto graphs = make_graphs(dir() / "g", "int", 4, 2000, rng_);
  add_expected(graphs);
  for (const auto& g : graphs) {
    auto r = run(wrapper_compile(g, dir() / "placeholder.neff"), options({{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  auto launcher = start({program("neuron_parallel_compile").string(), "--command", "compile", "--num_parallel", "2",
                         "--parallel_compile_workdir", (dir() / "w").string()},
                        options({{"STANDIN_CC_BASE_MS", "20000"}}), dir() / "launcher.log");
  // Wait until two compilers run.
  ASSERT_TRUE(npc::test::wait_until([&] { return compiles() >= 2; }, 10s));
  ASSERT_EQ(compiles(), 2u);
  // The launcher, its two workers and their compilers run now: the check
  // that none is left afterwards must be able to see them.
  ASSERT_GE(descendants_of(::getpid()).size(), 5u) << "the run's processes are not visible in /proc";
  auto t0 = std::chrono::steady_clock::now();
  util::kill_process_group(launcher.pid, SIGINT);
  auto ended = wait_for(launcher, 10s);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ended.exit_code, 130) << ended.output;
  EXPECT_LT(took, 2.5) << "every process of the run must be gone within about 2 s";
  EXPECT_NE(ended.output.find("interrupted by SIGINT"), std::string::npos) << ended.output;
  EXPECT_TRUE(descendants_of(::getpid()).empty()) << "a compile outlived the interrupted launcher";
  auto check = check_cache(cache_root(), expected_, true);
  EXPECT_TRUE(check.problems.empty()) << check.describe();
  EXPECT_EQ(check.failed, 0u) << "an interrupt must not be cached as a failure: " << check.describe();
  EXPECT_EQ(check.pending, 4u) << check.describe();
  auto next = run_tool("neuron_parallel_compile", {"--command", "compile", "--parallel_compile_workdir",
                                                   (dir() / "w").string()});
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  complete_with_wrapper("after the interrupt", graphs);
  record_figures({{"faults_injected", 1}});
}

// SIGINT and SIGTERM to the compile entry: 128+N, the compiler gone, nothing
// cached, and the same graph compiles on the next call.
TEST_F(InterruptTest, SignalsStopTheCompileEntryAndCacheNoFailure) {
  auto graphs = make_graphs(dir() / "g", "sig", 2, 2000, rng_);
  add_expected(graphs);
  int i = 0;
  for (int sig : {SIGINT, SIGTERM}) {
    const Graph& g = graphs[static_cast<std::size_t>(i++)];
    auto wrapper = start(wrapper_compile(g, dir() / "out.neff"), options({{"STANDIN_CC_BASE_MS", "20000"}}),
                         dir() / "wrapper.log");
    ASSERT_TRUE(npc::test::wait_until([&] { return compiles() >= static_cast<std::size_t>(i); }, 10s))
        << "the compiler never started: nothing for " << util::signal_name(sig) << " to stop";
    // The compile entry and its compiler, seen running.
    ASSERT_EQ(descendants_of(::getpid()).size(), 2u) << "the compile entry and its compiler are not visible";
    util::kill_process_group(wrapper.pid, sig);
    auto ended = wait_for(wrapper, 5s);
    EXPECT_EQ(ended.exit_code, 128 + sig) << ended.output;
    EXPECT_TRUE(descendants_of(::getpid()).empty()) << "the compiler outlived the interrupted compile entry";
    auto check = check_cache(cache_root(), expected_, true);
    EXPECT_EQ(check.failed, 0u) << check.describe();
  }
  complete_with_wrapper("after the signals", graphs);
  EXPECT_EQ(compiles(), 4u);
  record_figures({{"faults_injected", 2}});
}

// A compile entry killed by SIGKILL (the OOM killer, kill -9, a job
// scheduler) takes its compiler with it (PR_SET_PDEATHSIG): nobody would
// publish an orphan's result, and the next run would compile the same graph
// beside it. (Found by this suite: the compiler used to compile on.)
TEST_F(CrashTest, KilledCompileEntryLeavesNoCompilerRunning) {
  auto graphs = make_graphs(dir() / "g", "orphan", 1, 2000, rng_);
  auto wrapper = start(wrapper_compile(graphs[0], dir() / "out.neff"), options({{"STANDIN_CC_BASE_MS", "20000"}}),
                       dir() / "wrapper.log");
  ASSERT_TRUE(npc::test::wait_until([&] { return compiles() >= 1; }, 10s));
  ASSERT_EQ(compiles(), 1u);
  // The compiler runs below the compile entry now: the check below must see it.
  std::vector<std::string> running;
  for (pid_t p : descendants_of(::getpid())) running.push_back(cmdline_of(p));
  ASSERT_TRUE(std::any_of(running.begin(), running.end(),
                          [](const std::string& c) { return c.find("neuronx-cc") != std::string::npos; }))
      << "the compiler is not visible below its compile entry: " << running.size() << " processes";
  auto ended = kill_after(wrapper, 0us);
  ASSERT_TRUE(ended.killed) << "the compile entry ended before the kill landed: " << ended.output;
  // The kernel signals the compiler as its parent dies; it is gone as soon
  // as it has handled that, well within the deadline on a loaded machine.
  std::vector<std::string> left;
  const bool all_gone = npc::test::wait_until(
      [&] {
        left.clear();
        for (pid_t p : descendants_of(::getpid())) left.push_back(cmdline_of(p));
        return left.empty();
      },
      5s);
  EXPECT_TRUE(all_gone) << "still running 5 s after its compile entry was killed: "
                        << (left.empty() ? "" : left.front());
}

} // namespace
} // namespace npc::reltest
