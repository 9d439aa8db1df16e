// Faults: the stand-in compiler failing transiently and permanently, exiting
// with an internal error, dying by SIGKILL or SIGSEGV, hanging, writing a
// truncated NEFF, running out of memory; the cache's disk filling up at every
// point of a compile and publish; the cache on a read-only filesystem. Each
// must end with a clear message, the documented exit code, and a cache that
// is still consistent.

#include <cstring>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <thread>
#include <unistd.h>

#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/util/fs.hpp>

#include "reliability.hpp"

namespace npc::reltest {
namespace {

using namespace std::chrono_literals;
using npc::test::RunResult;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

class FaultTest : public npc::test::CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    become_subreaper();
    std::mt19937_64 rng(7);
    graphs_ = make_graphs(dir() / "g", "fault", 4, 3000, rng);
    fs::create_directories(dir() / "st");
  }
  void TearDown() override {
    kill_all_descendants();
    CacheTest::TearDown();
  }

  RunResult compile(const Graph& g, std::map<std::string, std::string> env = {},
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"compile", "--graph", g.path.string(), "--output", (dir() / "out.neff").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    fs::remove(dir() / "out.neff");
    return run_tool("neuron_cc_wrapper", args, std::move(env));
  }

  fs::path entry_of(const Graph& g) {
    auto key = run_tool("neuron_cc_wrapper", {"key", "--graph", g.path.string()});
    return key.out.substr(0, key.out.find('\n'));
  }

  void extract_all() {
    for (const auto& g : graphs_) {
      auto r = run_tool("neuron_cc_wrapper", {"compile", "--graph", g.path.string(), "--output",
                                              (dir() / "placeholder").string()},
                        {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}});
      ASSERT_EQ(r.exit_code, 0) << r.describe();
    }
  }

  RunResult launch(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> all = {"--command", "compile", "--parallel_compile_workdir", (dir() / "w").string()};
    all.insert(all.end(), args.begin(), args.end());
    return run_tool("neuron_parallel_compile", all, std::move(env));
  }

  void expect_consistent(const std::string& when) {
    auto check = check_cache(cache_root(), expected_map(graphs_), true);
    EXPECT_TRUE(check.problems.empty()) << when << ": " << check.describe();
    auto verify = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(verify.exit_code, 0) << when << ": " << verify.describe();
  }

  std::map<std::string, std::string> fault(const std::string& kind, const std::string& times = "always") {
    return {{"STANDIN_CC_FAULT", kind}, {"STANDIN_CC_FAULT_TIMES", times},
            {"STANDIN_CC_STATE_DIR", (dir() / "st").string()}};
  }

  std::vector<Graph> graphs_;
};

// Each way a compiler can die, through the compile entry: exit 1, the one
// error line naming the entry, how the compiler ended and where its full log
// is; the failure cached (the next call says so and how to retry); the
// cache consistent; --retry_failed_compilation compiles it once the fault is
// gone.
struct CompilerFault {
  const char* fault;
  const char* how; // in the message
};

class CompilerFaultTest : public FaultTest, public ::testing::WithParamInterface<CompilerFault> {};

TEST_P(CompilerFaultTest, ClearMessageExitOneConsistentCache) {
  const auto& f = GetParam();
  const Graph& g = graphs_[0];
  fs::path entry = entry_of(g);
  auto r = compile(g, fault(f.fault));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(first_line(r.err), "neuron_cc_wrapper: error: compilation of " + entry.string() + " failed: compiler " +
                                   f.how + "; full log: " + (entry / "model.log").string())
      << r.err;
  EXPECT_NE(r.err.find("last lines of the log:"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir() / "out.neff"));
  EXPECT_TRUE(fs::exists(entry / "model.log"));
  EXPECT_FALSE(fs::exists(entry / "model.done"));
  EXPECT_FALSE(fs::exists(entry / "model.neff")) << "a failed compile's output must not be published";
  expect_consistent(f.fault);
  // The cached failure, as torch-neuronx words it.
  auto again = compile(g);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(first_line(again.out), "Got a cached failed neff at " + (entry / "model.log").string() +
                                       ". Will skip compilation, please set --retry_failed_compilation");
  auto retried = compile(g, {}, {"--retry_failed_compilation"});
  EXPECT_EQ(retried.exit_code, 0) << retried.describe();
  EXPECT_EQ(file_sha256(dir() / "out.neff"), g.neff_sha256);
  EXPECT_FALSE(fs::exists(entry / "model.log")) << "a success removes the cached failure";
  expect_consistent(std::string(f.fault) + " then retried");
  record_figures({{"faults_injected", 1}});
}

INSTANTIATE_TEST_SUITE_P(Faults, CompilerFaultTest,
                         ::testing::Values(CompilerFault{"fail", "exit code 1"},
                                           CompilerFault{"exit70", "exit code 70"},
                                           CompilerFault{"segv", "killed by signal SIGSEGV"}),
                         [](const auto& info) { return std::string(info.param.fault); });

// True once some entry of the cache holds a compile's lock: a launcher's
// worker is compiling it.
bool some_entry_compiling(const std::vector<fs::path>& entries) {
  for (const auto& e : entries)
    if (fs::exists(e / "model.hlo_module.pb.lock")) return true;
  return false;
}

// `neuron_cache prune --max-size 1k --ttl 0` while a launcher has graphs
// queued: the prune evicts what it may (a compiled entry, the premise) but
// never a pending graph; the launcher compiles all of them.
TEST_F(FaultTest, PruneDuringALauncherRunKeepsItsQueuedGraphs) {
  std::vector<Graph> queued(graphs_.begin(), graphs_.begin() + 3);
  const Graph& old = graphs_[3];
  ASSERT_EQ(compile(old).exit_code, 0);
  fs::path old_entry = entry_of(old);
  ASSERT_TRUE(fs::exists(old_entry / "model.done"));
  graphs_ = queued;
  extract_all();
  std::vector<fs::path> pending;
  for (const auto& g : queued) pending.push_back(entry_of(g));
  RunResult launched;
  std::thread launcher([&] { launched = launch({"--num_parallel", "1"}, {{"STANDIN_CC_BASE_MS", "1500"}}); });
  bool compiling = npc::test::wait_until([&] { return some_entry_compiling(pending); }, std::chrono::seconds(20));
  RunResult pruned;
  if (compiling) pruned = run_tool("neuron_cache", {"--json", "prune", "--max-size", "1k", "--ttl", "0"});
  launcher.join();
  ASSERT_TRUE(compiling) << "the launcher never started a compile: " << launched.describe();
  ASSERT_EQ(pruned.exit_code, 0) << pruned.describe();
  // The premise: the prune ran while one compiled and two waited, and
  // removed what it may.
  auto doc = nlohmann::json::parse(pruned.out);
  EXPECT_EQ(doc["kept_pending"], 2) << pruned.out;
  EXPECT_EQ(doc["kept_locked"], 1) << pruned.out;
  ASSERT_EQ(doc["deleted"].size(), 1u) << pruned.out;
  EXPECT_NE(doc["deleted"][0].dump().find(old_entry.filename().string()), std::string::npos) << pruned.out;
  EXPECT_FALSE(fs::exists(old_entry));
  EXPECT_EQ(launched.exit_code, 0) << launched.describe();
  EXPECT_NE(launched.err.find("3 graphs found, 0 already cached, 3 compiled, 0 failed"), std::string::npos)
      << launched.err;
  for (const auto& e : pending) EXPECT_TRUE(fs::exists(e / "model.done")) << e;
  expect_consistent("prune during a launcher run");
}

// `--command clean` while a launcher runs: the entry being compiled is kept,
// the queued ones are removed; the launcher reports them as removed by
// another process, not as failures, and exits 0.
TEST_F(FaultTest, CleanDuringALauncherRunIsReportedAsRemovedNotFailed) {
  graphs_.resize(3);
  extract_all();
  std::vector<fs::path> pending;
  for (const auto& g : graphs_) pending.push_back(entry_of(g));
  fs::path report = dir() / "report.json";
  RunResult launched;
  std::thread launcher([&] {
    launched = launch({"--num_parallel", "1", "--report", report.string()}, {{"STANDIN_CC_BASE_MS", "1500"}});
  });
  bool compiling = npc::test::wait_until([&] { return some_entry_compiling(pending); }, std::chrono::seconds(20));
  RunResult cleaned;
  if (compiling)
    cleaned = run_tool("neuron_parallel_compile",
                       {"--command", "clean", "--parallel_compile_workdir", (dir() / "w2").string()});
  launcher.join();
  ASSERT_TRUE(compiling) << "the launcher never started a compile: " << launched.describe();
  ASSERT_EQ(cleaned.exit_code, 0) << cleaned.describe();
  EXPECT_NE(cleaned.out.find("removed 2 entries of neuronxcc-"), std::string::npos) << cleaned.out;
  EXPECT_NE(cleaned.out.find("; 1 being compiled were kept"), std::string::npos) << cleaned.out;
  EXPECT_EQ(launched.exit_code, 0) << launched.describe();
  EXPECT_NE(launched.err.find("3 graphs found, 0 already cached, 1 compiled, 0 failed, 0 retried, "
                              "2 removed by another process (not compiled)"),
            std::string::npos)
      << launched.err;
  EXPECT_EQ(launched.err.find("FAILED"), std::string::npos) << launched.err;
  std::size_t done = 0, gone = 0;
  for (const auto& e : pending) {
    if (fs::exists(e / "model.done")) ++done;
    if (!fs::exists(e)) ++gone;
  }
  EXPECT_EQ(done, 1u);
  EXPECT_EQ(gone, 2u);
  std::string text = npc::test::read_text(report);
  auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["compilation_summary"]["removed_elsewhere"], 2) << text;
  EXPECT_EQ(doc["compilation_summary"]["failed"], 0) << text;
  std::map<std::string, int> statuses;
  for (const auto& [graph, record] : doc["compilation_report"].items()) ++statuses[record["status"].get<std::string>()];
  EXPECT_EQ(statuses, (std::map<std::string, int>{{"compiled", 1}, {"removed_elsewhere", 2}})) << text;
}

// An entry removed while its worker compiles (its directory, the compile's
// working directory inside it, gone): removed by another process, nothing
// published, no half entry brought back.
TEST_F(FaultTest, EntryRemovedWhileItCompilesIsReportedAsRemoved) {
  graphs_.resize(1);
  extract_all();
  fs::path entry = entry_of(graphs_[0]);
  RunResult launched;
  std::thread launcher([&] { launched = launch({"--num_parallel", "1"}, {{"STANDIN_CC_BASE_MS", "1500"}}); });
  bool compiling = npc::test::wait_until([&] { return compiles() > 0; }, std::chrono::seconds(20));
  std::error_code ec;
  if (compiling) fs::remove_all(entry, ec);
  launcher.join();
  ASSERT_TRUE(compiling) << launched.describe();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(launched.exit_code, 0) << launched.describe();
  EXPECT_NE(launched.err.find("1 graphs found, 0 already cached, 0 compiled, 0 failed, 0 retried, "
                              "1 removed by another process (not compiled)"),
            std::string::npos)
      << launched.err;
  EXPECT_FALSE(fs::exists(entry)) << "publishing brought back part of a removed entry";
}

// A hanging compiler is killed at --timeout, with its whole process group.
TEST_F(FaultTest, HangingCompilerIsKilledAtTheTimeout) {
  const Graph& g = graphs_[0];
  fs::path entry = entry_of(g);
  auto t0 = std::chrono::steady_clock::now();
  auto r = compile(g, fault("hang"), {"--timeout", "1"});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(first_line(r.err).find("failed: compiler timed out after 1"), std::string::npos) << r.err;
  EXPECT_LT(took, 5.0);
  ASSERT_EQ(compiler_pids().size(), 1u) << "the compiler never ran: nothing hung to be killed";
  EXPECT_FALSE(alive(compiler_pids()[0])) << "the hung compiler outlived its timeout";
  EXPECT_TRUE(descendants_of(::getpid()).empty()) << "the hung compiler outlived its timeout";
  EXPECT_FALSE(fs::exists(entry / "model.log")) << "a timeout is not a cached failure";
  expect_consistent("hang");
  auto next = compile(g);
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_EQ(file_sha256(dir() / "out.neff"), g.neff_sha256);
  record_figures({{"faults_injected", 1}});
}

// The launcher: a transient failure is retried (--max-retries) and every
// graph ends compiled; SIGKILL (the OOM killer's signal) is retried even
// with no retries asked for.
TEST_F(FaultTest, LauncherRetriesTransientFailures) {
  extract_all();
  auto r = launch({"--max-retries", "1", "--num_parallel", "2"}, fault("fail", "1"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("4 compiled, 0 failed, 4 retried"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 8u);
  expect_consistent("transient failures");
  auto check = check_cache(cache_root(), {}, true);
  EXPECT_EQ(check.done, 4u) << check.describe();
  record_figures({{"faults_injected", 4}});
}

TEST_F(FaultTest, LauncherRetriesCompilesKilledBySigkill) {
  extract_all();
  auto r = launch({"--num_parallel", "2"}, fault("sigkill", "1"));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("killed by signal SIGKILL); retrying"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 8u);
  expect_consistent("sigkill once each");
  record_figures({{"faults_injected", 4}});
}

// A permanent failure: exit 1; the summary names each failed graph, how the
// compiler ended and its log (never an opaque "exception: None"); the next
// run reports the cached failure without compiling again.
TEST_F(FaultTest, LauncherReportsPermanentFailuresClearly) {
  extract_all();
  auto r = launch({"--max-retries", "2", "--num_parallel", "2"}, fault("exit70"));
  EXPECT_EQ(r.exit_code, 4) << r.describe(); // the number of graphs that failed
  EXPECT_NE(r.err.find("0 compiled, 4 failed, 4 retried"), std::string::npos) << r.err;
  for (const auto& g : graphs_) {
    fs::path entry = entry_of(g);
    EXPECT_NE(r.err.find("FAILED " + entry.string() + ": compiler exit code 70 (3 attempt(s)); log "), std::string::npos)
        << r.err;
    EXPECT_TRUE(fs::exists(entry / "model.log"));
  }
  EXPECT_EQ(r.err.find("None"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 12u);
  expect_consistent("permanent failures");
  auto next = launch({});
  EXPECT_EQ(next.exit_code, 4) << next.describe();
  EXPECT_NE(next.err.find("failure cached by an earlier compile"), std::string::npos) << next.err;
  EXPECT_EQ(compiles(), 12u) << "a cached failure is not compiled again unless asked";
  // Once the cause is fixed, clear-failed lets them compile.
  auto cleared = run_tool("neuron_cache", {"clear-failed"});
  EXPECT_EQ(cleared.exit_code, 0) << cleared.describe();
  EXPECT_NE(cleared.out.find("4 cached failures cleared"), std::string::npos) << cleared.out;
  auto fixed = launch({});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.describe();
  expect_consistent("after clear-failed");
  record_figures({{"faults_injected", 12}});
}

// A hanging compile under the launcher ends at --compile-timeout.
TEST_F(FaultTest, LauncherTimesOutHangingCompiles) {
  extract_all();
  auto t0 = std::chrono::steady_clock::now();
  auto r = launch({"--compile-timeout", "1", "--num_parallel", "4"}, fault("hang"));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 4) << r.describe();
  EXPECT_NE(r.err.find("timed out after 1"), std::string::npos) << r.err;
  EXPECT_LT(took, 8.0);
  ASSERT_EQ(compiler_pids().size(), 4u) << "not every graph's compiler ran and hung";
  for (pid_t pid : compiler_pids()) EXPECT_FALSE(alive(pid)) << "hung compiler " << pid << " outlived the launcher";
  EXPECT_TRUE(descendants_of(::getpid()).empty()) << "a hung compiler outlived the launcher";
  expect_consistent("hang");
  record_figures({{"faults_injected", 4}});
}

// Out of memory: the stand-in's memory ledger kills (SIGKILL) a compile that
// does not fit the budget next to the ones running. The launcher lowers its
// parallelism and retries, and every graph ends compiled.
TEST_F(FaultTest, LauncherSurvivesTheOomKiller) {
  extract_all();
  std::map<std::string, std::string> env = {{"STANDIN_CC_MEMORY_BUDGET", "48M"},
                                            {"STANDIN_CC_MEMORY_LEDGER", (dir() / "ledger").string()},
                                            {"STANDIN_CC_MEM_PER_GRAPH_BYTE", "10000"}, // 3 KB graph -> ~30 MB
                                            {"STANDIN_CC_BASE_MS", "1000"}}; // long enough to overlap
  auto r = launch({"--num_parallel", "4", "--memory-per-compile", "1M"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("killed by signal SIGKILL); retrying"), std::string::npos) << r.err;
  EXPECT_GT(compiles(), 4u);
  expect_consistent("oom");
  auto check = check_cache(cache_root(), {}, true);
  EXPECT_EQ(check.done, 4u) << check.describe();
  record_figures({{"faults_injected", compiles() - 4}});
}

// A compile killed by SIGKILL (what the kernel's OOM killer sends when a host
// runs out of memory) says nothing about the graph: the attempt is recorded,
// its log kept as npc-killed.log, and the entry left pending, so the next
// call compiles it without --retry_failed_compilation. (Found by this suite:
// it used to be cached as a failure, refusing the graph in every later run.)
TEST_F(FaultTest, CompileKilledByTheOomKillerIsNotCachedAsAFailure) {
  const Graph& g = graphs_[0];
  fs::path entry = entry_of(g);
  auto first = compile(g, fault("sigkill", "1"));
  EXPECT_EQ(first.exit_code, 1) << first.describe();
  EXPECT_EQ(first_line(first.err), "neuron_cc_wrapper: error: compilation of " + entry.string() +
                                       " failed: compiler killed by signal SIGKILL (as the kernel's out-of-memory "
                                       "killer does); not cached as a failure: the next run compiles it again; "
                                       "full log: " + (entry / "npc-killed.log").string())
      << first.err;
  EXPECT_FALSE(fs::exists(entry / "model.log"));
  EXPECT_TRUE(fs::exists(entry / "npc-killed.log"));
  expect_consistent("sigkill");
  auto second = compile(g, fault("sigkill", "1"));
  EXPECT_EQ(second.exit_code, 0) << "one OOM kill poisoned the graph:\n" << second.describe();
  EXPECT_EQ(file_sha256(dir() / "out.neff"), g.neff_sha256);
  EXPECT_EQ(compiles(), 2u);
  expect_consistent("sigkill then compiled");
  record_figures({{"faults_injected", 1}});
}

// ---- Disk full and read-only, on a small tmpfs ----------------------------

// Mounts need a private mount namespace, so nothing leaks out of the test
// process; they vanish with it. As root (CAP_SYS_ADMIN) that is a mount
// namespace of our own; otherwise a user namespace, where this user is root
// of its own mounts, if the kernel allows unprivileged ones. "" when one was
// made, else why not.
std::string make_private_mounts() {
  auto privatise = [] { return ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0; };
  if (::unshare(CLONE_NEWNS) == 0 && privatise()) return "";
  std::string as_root = std::strerror(errno);
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
    return "unshare(CLONE_NEWNS): " + as_root + "; unshare(CLONE_NEWUSER|CLONE_NEWNS): " + std::strerror(errno);
  npc::test::write_text("/proc/self/setgroups", "deny");
  npc::test::write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
  npc::test::write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
  if (!privatise()) return std::string("making / private in a user namespace: ") + std::strerror(errno);
  return "";
}

const std::string& private_mounts_failure() {
  static const std::string failure = make_private_mounts();
  return failure;
}

class MountTest : public FaultTest {
protected:
  void SetUp() override {
    FaultTest::SetUp();
    // A skipped test proves nothing: without a private tmpfs this fails and
    // says what it needs.
    ASSERT_EQ(private_mounts_failure(), "")
        << "cannot mount a private tmpfs: needs CAP_SYS_ADMIN (run the suite as root) or unprivileged user "
           "namespaces (sysctl kernel.unprivileged_userns_clone=1)";
  }
  void TearDown() override {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) std::ignore = ::umount2(it->c_str(), MNT_DETACH);
    FaultTest::TearDown();
  }
  void mount_tmpfs(const fs::path& where, std::size_t bytes) {
    fs::create_directories(where);
    std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    ASSERT_EQ(::mount("tmpfs", where.c_str(), "tmpfs", 0, opts.c_str()), 0) << std::strerror(errno);
    mounts_.push_back(where);
  }
  void remount_read_only(const fs::path& where) {
    ASSERT_EQ(::mount("tmpfs", where.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  }
  std::vector<fs::path> mounts_;
};

// The cache's filesystem full at each point of a compile: the free space is
// swept in steps across everything a compile writes (graph, flags, lock,
// version memo, NEFF, log, record, done marker). Each run either succeeds,
// fails the compile (exit 1), or finds the cache unusable (exit 3), always
// with "No space left on device" in its message; the cache stays consistent;
// with the space back, the next run finishes.
TEST_F(MountTest, DiskFullAtEveryPointOfACompile) {
  constexpr std::size_t kDisk = 512 * 1024;
  mount_tmpfs(dir() / "c", kDisk);
  std::mt19937_64 rng(11);
  auto big = make_graphs(dir() / "big", "full", 1, 60000, rng); // NEFF ~30 KB
  graphs_ = big;
  std::map<int, int> outcomes;
  int points = 0;
  // tmpfs counts whole pages: one step per page up to what a compile needs.
  for (std::size_t free_bytes = 0; free_bytes <= 160 * 1024; free_bytes += 4096) {
    SCOPED_TRACE("free bytes: " + std::to_string(free_bytes));
    // The root is the mount point itself: empty it, do not remove it.
    for (const auto& child : fs::directory_iterator(cache_root())) fs::remove_all(child.path());
    // Fill all but free_bytes.
    {
      auto filler = dir() / "c" / "filler";
      npc::test::write_text(filler, std::string(kDisk - free_bytes, 'x'));
    }
    auto r = compile(graphs_[0], {}, {"--retry_failed_compilation"});
    ++points;
    ++outcomes[r.exit_code];
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 3) << r.describe();
    if (r.exit_code != 0) {
      EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.describe();
      EXPECT_FALSE(fs::exists(dir() / "out.neff"));
    } else {
      EXPECT_EQ(file_sha256(dir() / "out.neff"), graphs_[0].neff_sha256);
    }
    if (r.exit_code == 3) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
    }
    auto check = check_cache(cache_root(), expected_map(graphs_), true);
    EXPECT_TRUE(check.problems.empty()) << check.describe();
    // Space back: the next run finishes.
    fs::remove(dir() / "c" / "filler");
    auto verify = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(verify.exit_code, 0) << verify.describe();
    auto next = compile(graphs_[0], {}, {"--retry_failed_compilation"});
    EXPECT_EQ(next.exit_code, 0) << next.describe();
    EXPECT_EQ(file_sha256(dir() / "out.neff"), graphs_[0].neff_sha256);
    if (HasFailure()) break;
  }
  std::cout << "[ diskfull ] " << points << " fill levels: " << outcomes[0] << " succeeded, " << outcomes[1]
            << " compile failed (exit 1), " << outcomes[3] << " cache unusable (exit 3)" << std::endl;
  EXPECT_GT(outcomes[0], 0);
  EXPECT_GT(outcomes[1] + outcomes[3], 0);
  record_figures({{"faults_injected", static_cast<std::uint64_t>(points)}, {"disk_full_points", static_cast<std::uint64_t>(points)}});
}

// The launcher with the disk filling while its workers publish.
TEST_F(MountTest, DiskFullUnderTheLauncher) {
  mount_tmpfs(dir() / "c", 320 * 1024);
  std::mt19937_64 rng(12);
  graphs_ = make_graphs(dir() / "big", "lfull", 6, 40000, rng);
  extract_all();
  // What is left after six 40 KB graphs: not room for six 20 KB NEFFs.
  auto r = launch({"--num_parallel", "2"});
  // How many of the six fail depends on which compile fills the disk; the
  // exit status is exactly that number, as the summary says.
  std::smatch failed;
  ASSERT_TRUE(std::regex_search(r.err, failed, std::regex("Total failed compilations: ([0-9]+)"))) << r.err;
  EXPECT_GE(std::stoi(failed[1]), 1) << r.err;
  EXPECT_EQ(r.exit_code, std::stoi(failed[1])) << r.describe();
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  // A full disk is not the compiler's fault, and the summary does not say so.
  EXPECT_EQ(r.err.find(": compiler not compiled"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(": compiler No space"), std::string::npos) << r.err;
  expect_consistent("disk full under the launcher");
  // Space back (a bigger disk): the next run finishes every graph.
  ASSERT_EQ(::mount("tmpfs", (dir() / "c").c_str(), "tmpfs", MS_REMOUNT, "size=4m"), 0) << std::strerror(errno);
  auto next = launch({}, {{"NEURON_CC_FLAGS", "--cache_dir=" + (dir() / "c").string() + " --retry_failed_compilation"}});
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  auto check = check_cache(cache_root(), expected_map(graphs_), true);
  EXPECT_EQ(check.done, 6u) << check.describe();
  record_figures({{"faults_injected", 1}});
}

// The cache's filesystem fills during a compile (the graph was extracted
// with room to spare; the NEFF does not fit): the entry is not cached as
// failed, the message names the space problem and the full place, and once
// space is freed a plain rerun (no --retry_failed_compilation) compiles it.
TEST_F(MountTest, CacheFillingDuringACompileLeavesTheGraphPending) {
  constexpr std::size_t kDisk = 512 * 1024;
  mount_tmpfs(dir() / "c", kDisk);
  std::mt19937_64 rng(13);
  graphs_ = make_graphs(dir() / "big", "fill", 1, 60000, rng); // NEFF ~30 KB
  extract_all();
  fs::path entry = entry_of(graphs_[0]);
  ASSERT_TRUE(fs::exists(entry / "model.hlo_module.pb"));
  // Room for the lock and the record, not for the NEFF.
  struct statvfs before {};
  ASSERT_EQ(::statvfs((dir() / "c").c_str(), &before), 0);
  std::size_t free_now = static_cast<std::size_t>(before.f_bavail) * before.f_frsize;
  ASSERT_GT(free_now, 16u * 1024);
  npc::test::write_text(dir() / "c" / "filler", std::string(free_now - 16 * 1024, 'x'));
  auto r = launch({"--num_parallel", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("No space left on device: the filesystem of " + entry.string() + " is full ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("free space and run again: the graph stays pending, no failure is cached"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("cached by an earlier compile"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(entry / "model.log")) << "running out of space was cached as a compile failure";
  EXPECT_FALSE(fs::exists(entry / "model.done"));
  EXPECT_TRUE(fs::exists(entry / "model.hlo_module.pb"));
  auto meta = npc::test::read_text(entry / "npc-entry.json");
  EXPECT_NE(meta.find("\"no_space\""), std::string::npos) << meta;
  // Space freed: the next plain run compiles it.
  fs::remove(dir() / "c" / "filler");
  auto next = launch({});
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_NE(next.err.find("1 compiled, 0 failed"), std::string::npos) << next.err;
  EXPECT_TRUE(fs::exists(entry / "model.done"));
  expect_consistent("after the disk filled during a compile");
  record_figures({{"faults_injected", 1}});
}

// A cache on a read-only filesystem: hits are still served; a miss fails
// with exit 3 and names the path and the reason; maintenance that must write
// fails the same way; verify still reads.
TEST_F(MountTest, CacheOnAReadOnlyFilesystem) {
  mount_tmpfs(dir() / "c", 4 * 1024 * 1024);
  ASSERT_EQ(compile(graphs_[0]).exit_code, 0);
  ASSERT_EQ(compile(graphs_[1]).exit_code, 0);
  remount_read_only(dir() / "c");
  auto hit = compile(graphs_[0]);
  EXPECT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_NE(hit.out.find("Using a cached neff"), std::string::npos) << hit.out;
  EXPECT_EQ(file_sha256(dir() / "out.neff"), graphs_[0].neff_sha256);
  auto miss = compile(graphs_[2]);
  EXPECT_EQ(miss.exit_code, 3) << miss.describe();
  EXPECT_EQ(std::count(miss.err.begin(), miss.err.end(), '\n'), 1) << miss.err;
  EXPECT_NE(miss.err.find("Read-only file system"), std::string::npos) << miss.err;
  EXPECT_TRUE(miss.err.starts_with("neuron_cc_wrapper: error: ")) << miss.err;
  auto verify = run_tool("neuron_cache", {"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.describe();
  auto prune = run_tool("neuron_cache", {"prune", "--max-size", "0", "--ttl", "0"});
  EXPECT_EQ(prune.exit_code, 3) << prune.describe();
  EXPECT_NE(prune.err.find("Read-only file system"), std::string::npos) << prune.err;
  auto launcher = launch({});
  EXPECT_EQ(launcher.exit_code, 0) << "nothing pending to compile: " << launcher.describe();
  auto check = check_cache(cache_root(), expected_map(graphs_), true);
  EXPECT_TRUE(check.problems.empty()) << check.describe();
  EXPECT_EQ(check.done, 2u);
  record_figures({{"faults_injected", 4}});
}

// A workdir whose filesystem is full: the trial still runs and its output
// still reaches the terminal, but the launcher, which announced that the
// output is also in the trial log, says once that it could not be kept there.
TEST_F(MountTest, FullWorkdirSaysTheTrialLogIsNotKept) {
  mount_tmpfs(dir() / "w", 64 * 1024);
  // Fill it: tmpfs counts pages, so write until it refuses.
  {
    std::string page(4096, 'x');
    std::ofstream filler(dir() / "w" / "filler", std::ios::binary);
    while (filler.write(page.data(), static_cast<std::streamsize>(page.size())) && filler.flush()) {
    }
  }
  auto r = run_tool("neuron_parallel_compile", {"--parallel_compile_workdir", (dir() / "w").string(), "--", "/bin/sh",
                                                "-c", "echo output of the trial"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("output of the trial\n"), std::string::npos) << r.describe();
  std::regex said("neuron_parallel_compile: warning: cannot write the trial log " + (dir() / "w").string() +
                  "/trial_run_pid[0-9]+_log\\.txt: No space left on device; the rest of the trial's output is not "
                  "kept there\n");
  EXPECT_TRUE(std::regex_search(r.err, said)) << r.describe();
  record_figures({{"faults_injected", 1}});
}

// A --report or workdir on a read-only filesystem (root writes anywhere
// else): found before the trial starts, in one line, exit 3.
TEST_F(MountTest, UnwritableReportOrWorkdirIsFoundBeforeTheTrial) {
  mount_tmpfs(dir() / "ro", 64 * 1024);
  remount_read_only(dir() / "ro");
  const std::string marker = (dir() / "trial-ran").string();
  auto report = run_tool("neuron_parallel_compile",
                         {"--parallel_compile_workdir", (dir() / "w").string(), "--report",
                          (dir() / "ro" / "r.json").string(), "--", "/bin/sh", "-c", "touch " + marker});
  EXPECT_EQ(report.exit_code, 3) << report.describe();
  EXPECT_EQ(report.err, "neuron_parallel_compile: error: --report: cannot write " + (dir() / "ro" / "r.json").string() +
                            ": Read-only file system (name a file in a writable directory)\n")
      << report.describe();
  EXPECT_FALSE(fs::exists(marker)) << "the trial ran before the report's place was checked";

  auto workdir = run_tool("neuron_parallel_compile", {"--parallel_compile_workdir", (dir() / "ro").string(), "--",
                                                      "/bin/sh", "-c", "touch " + marker});
  EXPECT_EQ(workdir.exit_code, 3) << workdir.describe();
  std::regex said("neuron_parallel_compile: error: --parallel_compile_workdir: cannot create directory " +
                  (dir() / "ro").string() +
                  "/compile_logs_pid[0-9]+: Read-only file system \\(name a writable directory\\)\n");
  EXPECT_TRUE(std::regex_match(workdir.err, said)) << workdir.describe();
  EXPECT_FALSE(fs::exists(marker)) << "the trial ran in an unwritable workdir";
  record_figures({{"faults_injected", 2}});
}

} // namespace
} // namespace npc::reltest
