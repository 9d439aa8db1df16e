// neuron_parallel_compile beside current torch-neuronx: the stand-in training
// script in its torch-neuronx mode writes the cache itself (decimal graph
// keys, MD5 flags part, the root URL in the cache-path log, a cache dir the
// script sets, model.hlo_module.pb.lock while it compiles just in time).

#include <csignal>
#include <regex>
#include <sstream>
#include <set>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/process.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

// init + 2 train + eval in a 10-step trial.
constexpr std::size_t kGraphs = 4;
constexpr const char* kLock = "model.hlo_module.pb.lock";

class FrameworkProtocol : public CacheTest {
protected:
  // The cache dir the script sets for itself; tests of odd bytes in paths change it.
  std::string script_dir_name = "script-cache";
  fs::path script_root() const { return dir() / script_dir_name; }
  fs::path workdir() const { return dir() / "wd"; }
  std::vector<std::string> train(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {(standin_dir() / "standin_train").string(), "--protocol", "torch-neuronx",
                                     "--script_cache_dir", script_root().string(), "--nproc_per_node", "2",
                                     "--steps_this_run", "10", "--graphs_per_step", "2", "--eval_every", "5",
                                     "--layers", "2", "--hidden", "64", "--workdir", (dir() / "train").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  RunResult launch(std::vector<std::string> ours, const std::vector<std::string>& command = {},
                   std::map<std::string, std::string> env = {}) const {
    ours.insert(ours.begin(), "--parallel_compile_workdir=" + workdir().string());
    ours.insert(ours.begin(), "--num_parallel=2");
    ours.insert(ours.end(), command.begin(), command.end());
    return run_tool("neuron_parallel_compile", ours, std::move(env));
  }
  std::vector<fs::path> entries_in(const fs::path& root) const {
    std::vector<fs::path> found;
    std::error_code ec;
    for (fs::directory_iterator it(root / (std::string("neuronxcc-") + kStandinVersion), ec), end; !ec && it != end;
         it.increment(ec))
      found.push_back(it->path());
    std::sort(found.begin(), found.end());
    return found;
  }
  // Extracts the graphs into the script's cache (launcher --command collect).
  void extract() {
    auto r = launch({"--command", "collect"}, train());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    ASSERT_EQ(entries_in(script_root()).size(), kGraphs);
    ASSERT_EQ(compiles(), 0u);
  }
  RunResult compile_pending(std::vector<std::string> extra = {}) {
    std::vector<std::string> ours = {"--command", "compile"};
    ours.insert(ours.end(), extra.begin(), extra.end());
    // --command compile looks at the launcher's own root: the script's here.
    return launch(ours, {}, {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()}});
  }
};

TEST_F(FrameworkProtocol, ScriptSetCacheDirIsLearnedAndEveryGraphCompiledWhereTheFrameworkPutIt) {
  auto r = launch({}, train());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs);
  EXPECT_TRUE(entries_in(cache_root()).empty()) << "the launcher's own root was not used";
  auto found = entries_in(script_root());
  ASSERT_EQ(found.size(), kGraphs);
  for (const auto& e : found) {
    EXPECT_TRUE(std::regex_match(e.filename().string(), std::regex("MODULE_[0-9]+\\+d41d8cd9"))) << e;
    EXPECT_TRUE(fs::exists(e / "model.done")) << e;
    EXPECT_TRUE(fs::exists(e / "model.neff")) << e;
    EXPECT_FALSE(fs::exists(e / kLock)) << e;
  }
  EXPECT_NE(r.err.find("Total graphs: 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Total successful compilations: 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Total failed compilations: 0"), std::string::npos) << r.err;
  // The original's file names in the workdir; the path log holds the root.
  std::size_t trial_logs = 0, path_logs = 0;
  for (const auto& f : fs::directory_iterator(workdir())) {
    std::string name = f.path().filename().string();
    if (std::regex_match(name, std::regex("trial_run_pid[0-9]+_log\\.txt"))) ++trial_logs;
    if (std::regex_match(name, std::regex("cache_path_pid[0-9]+_log\\.txt"))) {
      ++path_logs;
      EXPECT_EQ(read_text(f.path()).substr(0, script_root().string().size()), script_root().string());
    }
  }
  EXPECT_EQ(trial_logs, 1u);
  EXPECT_EQ(path_logs, 1u);

  // The real run that follows compiles nothing.
  auto real = run(train(), options());
  ASSERT_EQ(real.exit_code, 0) << real.describe();
  EXPECT_EQ(train_total_field(real.out, "jit_compiles"), 0) << real.out;
  EXPECT_EQ(train_total_field(real.out, "cache_hits"), static_cast<int>(2 * kGraphs)) << real.out;
  EXPECT_EQ(compiles(), kGraphs);
}

TEST_F(FrameworkProtocol, ExtractedGraphsNoneOfWhichCanBeTakenAreAnError) {
  // A script that reports a graph under a root nobody named.
  fs::path entry = dir() / "elsewhere" / (std::string("neuronxcc-") + kStandinVersion) / "MODULE_1+d41d8cd9";
  fs::create_directories(entry);
  write_text(entry / "model.hlo_module.pb", "HloModule x\n");
  write_text(entry / "compile_flags.json", "[]");
  auto r = launch({}, {"/bin/sh", "-c",
                       "echo 'Extracting graphs (" + (entry / "model.hlo_module.pb").string() +
                           ") for ahead-of-time parallel compilation. No compilation was done.'"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("the trial extracted 1 graph(s) and none could be taken"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("graphs found"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 0u);
}

// A cache-path log full of garbage: one warning for the lot, and the graph
// the trial named is compiled.
TEST_F(FrameworkProtocol, GarbageInTheCachePathLogIsOneWarning) {
  fs::path entry = cache_root() / (std::string("neuronxcc-") + kStandinVersion) / "MODULE_1+d41d8cd9";
  write_text(entry / "model.hlo_module.pb", "HloModule garbage_log\n");
  write_text(entry / "compile_flags.json", "[]");
  auto r = launch({}, {"/bin/sh", "-c",
                       "awk 'BEGIN { for (i = 0; i < 400; i++) { printf \"garbage %d \", i; "
                       "for (j = 0; j < 240; j++) printf \"x\"; print \"\" } }' "
                       "> \"$NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG\"; "
                       "echo 'Extracting graphs (" + (entry / "model.hlo_module.pb").string() +
                           ") for ahead-of-time parallel compilation. No compilation was done.'"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 1u);
  std::size_t warnings = 0;
  for (auto at = r.err.find("warning: "); at != std::string::npos; at = r.err.find("warning: ", at + 1)) ++warnings;
  EXPECT_EQ(warnings, 2u) << r.err;
  EXPECT_NE(r.err.find("refused 399 more from the cache-path log for the same reason: not an absolute path"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.err.size(), 4000u);
}

// The extraction lines are read by lines: a newline in the cache path cuts
// every one. The graphs are then taken from the root the cache-path log names
// (a scan of the pending entries the trial wrote), never skipped with exit 0.
TEST_F(FrameworkProtocol, ANewlineInTheCachePathStillCompilesEveryExtractedGraph) {
  script_dir_name = "script\ncache";
  // The root comes quoted in NEURON_CC_FLAGS (a script's unquoted assignment
  // would split it into two flags before any cache is touched).
  std::vector<std::string> command = train();
  auto named = std::find(command.begin(), command.end(), "--script_cache_dir");
  ASSERT_NE(named, command.end());
  command.erase(named, named + 2);
  auto r = launch({"--report", (dir() / "report.json").string()}, command,
                  {{"NEURON_CC_FLAGS", "--cache_dir='" + script_root().string() + "'"}});
  // The premise: the framework's lines were cut by the newline.
  ASSERT_NE(r.out.find("Extracting graphs (" + (dir() / "script\ncache/neuronxcc-").string()), std::string::npos)
      << r.describe();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("extraction line(s) of the trial's output name no graph path (a newline in the cache "
                       "path?); took the 4 pending graph(s) the trial wrote under "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("4 graphs found, 0 already cached, 4 compiled, 0 failed"), std::string::npos) << r.err;
  // (compiles() counts the stand-in's invocation log by lines, which the
  // newline in each path splits: the done entries and the report count here.)
  auto found = entries_in(script_root());
  ASSERT_EQ(found.size(), kGraphs);
  for (const auto& e : found) EXPECT_TRUE(fs::exists(e / "model.done")) << e;
  auto report = util::parse_json_text(read_text(dir() / "report.json"));
  ASSERT_TRUE(report.ok()) << report.error();
  ASSERT_EQ((*report)["compilation_report"].size(), kGraphs);
  for (const auto& [graph, item] : (*report)["compilation_report"].items()) {
    EXPECT_TRUE(graph.starts_with(script_root().string() + "/")) << graph;
    EXPECT_EQ(item["status"], "compiled") << graph;
  }
}

// A cache path that is not UTF-8: compiled, and the report names it
// losslessly (\udcXX for each such byte, README "Paths and flags in JSON").
TEST_F(FrameworkProtocol, ACachePathThatIsNotUtf8IsCompiledAndReportedLosslessly) {
  script_dir_name = "script\xff" "cache";
  auto r = launch({"--report", (dir() / "report.json").string()}, train());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs);
  auto found = entries_in(script_root());
  ASSERT_EQ(found.size(), kGraphs);
  for (const auto& e : found) EXPECT_TRUE(fs::exists(e / "model.done")) << e;
  std::string text = read_text(dir() / "report.json");
  EXPECT_NE(text.find("/script\\udcffcache/neuronxcc-"), std::string::npos) << text;
  auto report = util::parse_json_text(text);
  ASSERT_TRUE(report.ok()) << report.error();
  ASSERT_EQ((*report)["compilation_report"].size(), kGraphs);
  for (const auto& [graph, item] : (*report)["compilation_report"].items()) {
    EXPECT_TRUE(fs::exists(graph)) << graph;
    EXPECT_TRUE(graph.starts_with(script_root().string() + "/")) << graph;
    EXPECT_EQ(item["status"], "compiled") << graph;
  }
}

TEST_F(FrameworkProtocol, AnEntryWithTheFrameworksLockIsNotCompiledAndLeftToItsHolder) {
  extract();
  auto found = entries_in(script_root());
  write_text(found[0] / kLock, ""); // the framework's: no owner facts
  auto r = compile_pending();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs - 1);
  EXPECT_TRUE(fs::exists(found[0] / kLock)) << "a fresh lock is never broken";
  EXPECT_FALSE(fs::exists(found[0] / "model.done"));
  EXPECT_NE(r.err.find("1 locked by another process (left to it)"), std::string::npos) << r.err;
  for (std::size_t i = 1; i < found.size(); ++i) EXPECT_FALSE(fs::exists(found[i] / kLock)) << found[i];
  // The totals count the graph left, and the summary says to whom and how
  // to clear a lock whose holder is gone.
  EXPECT_NE(r.err.find("Total graphs: 4\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Total successful compilations: 3\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Total failed compilations: 0\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("LEFT " + found[0].string() + ": held by whoever made the lock " +
                       (found[0] / kLock).string() + ", "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("if that process is gone, `neuron_parallel_compile --command clear-locks` removes its lock"),
            std::string::npos)
      << r.err;
}

// A pid in use proves nothing without the holder's start time (pid 1 is
// always in use): such a lock is judged by its age, and the graph is left
// to it at once, saying so, instead of a silent wait of --lock-timeout.
TEST_F(FrameworkProtocol, ALockNamingALivePidWithoutItsStartTimeIsNotWaitedFor) {
  extract();
  auto found = entries_in(script_root());
  util::LockHolder owner = util::LockHolder::self("torch-neuronx");
  owner.pid = 1;
  owner.process_start = 0;
  write_text(found[0] / kLock, owner.serialize() + "\n");
  auto r = compile_pending({"--lock-timeout", "3600"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs - 1);
  EXPECT_TRUE(fs::exists(found[0] / kLock));
  EXPECT_NE(r.err.find("waiting for " + found[0].filename().string() + ", held by pid 1 on " + owner.host),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("LEFT " + found[0].string() + ": held by pid 1 on " + owner.host), std::string::npos) << r.err;
}

// A live holder is waited for, and the wait says for whom from its start.
TEST_F(FrameworkProtocol, AWaitForALiveHolderSaysWhomItWaitsFor) {
  extract();
  auto found = entries_in(script_root());
  util::LockHolder me = util::LockHolder::self("test"); // this test process: alive
  write_text(found[0] / kLock, me.serialize() + "\n");
  pid_t launcher = start_tool("neuron_parallel_compile",
                              {"--parallel_compile_workdir=" + workdir().string(), "--num_parallel=2", "--command",
                               "compile"},
                              {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()}}, dir() / "launcher.log");
  const std::string said = "waiting for " + found[0].filename().string() + ", held by pid " + std::to_string(me.pid);
  bool waiting = wait_until([&] { return read_text(dir() / "launcher.log").find(said) != std::string::npos; },
                            std::chrono::seconds(10));
  EXPECT_TRUE(waiting) << read_text(dir() / "launcher.log");
  EXPECT_TRUE(fs::exists(found[0] / kLock));
  fs::remove(found[0] / kLock); // the holder is done with it
  auto status = util::wait_child(launcher);
  EXPECT_EQ(status.code, 0) << status.describe() << read_text(dir() / "launcher.log");
  EXPECT_EQ(compiles(), kGraphs);
  EXPECT_TRUE(fs::exists(found[0] / "model.done"));
}

TEST_F(FrameworkProtocol, ALockOfADeadOwnerOnThisHostIsStaleAndTakenOver) {
  extract();
  auto found = entries_in(script_root());
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  util::LockHolder owner = util::LockHolder::self("neuron_parallel_compile");
  owner.pid = dead;
  owner.process_start = 0;
  write_text(found[0] / kLock, owner.serialize() + "\n");
  auto r = compile_pending();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs);
  EXPECT_TRUE(fs::exists(found[0] / "model.done"));
  EXPECT_FALSE(fs::exists(found[0] / kLock));
}

TEST_F(FrameworkProtocol, ALockWithoutOwnerFactsIsStaleOnlyPastTheLockTimeout) {
  extract();
  auto found = entries_in(script_root());
  write_text(found[0] / kLock, "garbage \x01\x02 not owner facts");
  struct timespec old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (found[0] / kLock).c_str(), old, 0), 0);
  auto kept = compile_pending({"--lock-timeout", "3600"});
  EXPECT_EQ(kept.exit_code, 0) << kept.describe();
  EXPECT_EQ(compiles(), kGraphs - 1);
  EXPECT_TRUE(fs::exists(found[0] / kLock));
  auto taken = compile_pending({"--lock-timeout", "60"});
  EXPECT_EQ(taken.exit_code, 0) << taken.describe();
  EXPECT_EQ(compiles(), kGraphs);
  EXPECT_TRUE(fs::exists(found[0] / "model.done"));
  EXPECT_FALSE(fs::exists(found[0] / kLock));
}

TEST_F(FrameworkProtocol, ClearLocksRemovesEveryLockButOneWhoseOwnerIsAlive) {
  extract();
  auto found = entries_in(script_root());
  write_text(found[0] / kLock, "");
  write_text(found[1] / kLock, util::LockHolder::self("test").serialize() + "\n"); // this test process: alive
  std::map<std::string, std::string> env = {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()}};
  auto r = run_tool("neuron_parallel_compile", {"--command", "clear-locks"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(found[0] / kLock));
  EXPECT_TRUE(fs::exists(found[1] / kLock));
  EXPECT_NE(r.out.find("kept " + (found[1] / kLock).string() + ": its owner is running"), std::string::npos) << r.out;
  auto tool = run_tool("neuron_cache", {"clear-locks"}, env);
  EXPECT_EQ(tool.exit_code, 0) << tool.describe();
  EXPECT_TRUE(fs::exists(found[1] / kLock));
}

TEST_F(FrameworkProtocol, TheLockExistsWithOwnerFactsWhileWeCompileAndIsGoneAfter) {
  extract();
  auto found = entries_in(script_root());
  fs::path out = dir() / "compile-entry.out";
  std::map<std::string, std::string> env = {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()},
                                            {"STANDIN_CC_FAULT", "hang"}};
  pid_t pid = start_tool("neuron_cc_wrapper", {"compile-entry", found[0].string(), "--timeout", "5"}, env, out);
  std::string record;
  std::ignore = wait_until(
      [&] {
        record = read_text(found[0] / kLock);
        return record.find("pid=") != std::string::npos;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(10));
  auto parsed = storage::LockRecord::parse(record);
  ASSERT_TRUE(parsed.has_value()) << "no lock record while compiling: '" << record << "'";
  EXPECT_GT(parsed->expires_unix, 0) << record;
  EXPECT_FALSE(parsed->token.empty()) << record;
  auto owner = parsed->holder();
  ASSERT_TRUE(owner.has_value()) << "no owner facts in the lock while compiling: '" << record << "'";
  EXPECT_EQ(owner->pid, pid);
  EXPECT_EQ(owner->tool, "neuron_cc_wrapper");
  EXPECT_EQ(owner->boot_id, util::this_boot_id());
  EXPECT_EQ(util::liveness(*owner), util::Liveness::alive);
  std::ignore = util::wait_child(pid);
  EXPECT_FALSE(fs::exists(found[0] / kLock)) << "the lock outlived the compile";
}

TEST_F(FrameworkProtocol, TheFrameworkAndTheLauncherCompilingOneCacheAtOnceNeverCompileTwice) {
  extract();
  // A just-in-time run of the framework and the launcher's compile of the
  // same pending entries, started together; each graph costs 300 ms.
  std::map<std::string, std::string> slow = {{"STANDIN_CC_BASE_MS", "300"}};
  pid_t framework = start_background(train(), options(slow), dir() / "framework.out");
  auto r = launch({"--command", "compile"}, {},
                  {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()}, {"STANDIN_CC_BASE_MS", "300"}});
  auto status = util::wait_child(framework);
  EXPECT_TRUE(status.success()) << read_text(dir() / "framework.out");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs) << read_text(invocation_log());
  for (const auto& e : entries_in(script_root())) {
    EXPECT_TRUE(fs::exists(e / "model.done")) << e;
    EXPECT_FALSE(fs::exists(e / kLock)) << e;
  }
}

TEST_F(FrameworkProtocol, DumpResultsWritesTheOriginalsFilesIntoTheCurrentDirectory) {
  auto r = launch({}, train(), {{"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<fs::path> results, totals;
  for (const auto& f : fs::directory_iterator(dir())) {
    std::string name = f.path().filename().string();
    if (std::regex_match(name, std::regex("neuron_parallel_compile_results_[0-9.]+\\.json"))) results.push_back(f);
    if (std::regex_match(name, std::regex("total_neuron_parallel_compile_results_[0-9.]+\\.json"))) totals.push_back(f);
  }
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(totals.size(), 1u);
  auto doc = nlohmann::json::parse(read_text(results[0]));
  EXPECT_EQ(doc["compilation_summary"], nlohmann::json({{"true", kGraphs}}));
  ASSERT_EQ(doc["compilation_report"].size(), kGraphs);
  for (const auto& [path, record] : doc["compilation_report"].items()) {
    EXPECT_TRUE(path.starts_with(script_root().string())) << path;
    EXPECT_TRUE(path.ends_with("/model.hlo_module.pb")) << path;
    EXPECT_EQ(record["status"], true);
    EXPECT_EQ(record["retry"], 0);
  }
  EXPECT_TRUE(nlohmann::json::parse(read_text(totals[0])).contains("total_neuron_parallel_compile_time"));
}

TEST_F(FrameworkProtocol, ExitStatusIsTheNumberOfFailedGraphs) {
  auto r = launch({}, train(), {{"STANDIN_CC_FAULT", "fail"}});
  EXPECT_EQ(r.exit_code, static_cast<int>(kGraphs)) << r.describe();
  EXPECT_NE(r.err.find("Total failed compilations: 4"), std::string::npos) << r.err;
}

TEST_F(FrameworkProtocol, AFailedTrialExitsOne) {
  auto r = launch({}, train({"--crash_at_step", "3"}));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(compiles(), 0u);
}

TEST_F(FrameworkProtocol, CacheOfTheOldLayoutUnderCacheDirKeepsWorking) {
  // An old release's cache: --cache_dir=DIR kept it at DIR/neuron-compile-cache.
  fs::path old_dir = dir() / "old";
  std::map<std::string, std::string> old_layout = {
      {"NEURON_CC_FLAGS", "--cache_dir=" + (old_dir / "neuron-compile-cache").string()}};
  write_text(dir() / "g.hlo", "HloModule old_layout\n");
  auto first = run_tool("neuron_cc_wrapper", {"compile", "--graph", (dir() / "g.hlo").string(), "--output",
                                              (dir() / "a.neff").string()}, old_layout);
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  ASSERT_EQ(compiles(), 1u);
  auto again = run_tool("neuron_cc_wrapper", {"compile", "--graph", (dir() / "g.hlo").string(), "--output",
                                              (dir() / "b.neff").string()},
                        {{"NEURON_CC_FLAGS", "--cache_dir=" + old_dir.string()}});
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 1u) << "the old layout was not found";
  EXPECT_NE(again.out.find("Using a cached neff at " + (old_dir / "neuron-compile-cache").string()), std::string::npos)
      << again.describe();
  EXPECT_NE(again.err.find("the layout of older releases"), std::string::npos) << again.err;
}

TEST_F(FrameworkProtocol, CompileWorkdirAndDumpAreWrapperOptionsNeverPassedToTheCompiler) {
  extract();
  auto found = entries_in(script_root());
  auto r = launch({"--command", "compile"}, {},
                  {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string() + " --compile_workdir=" +
                                           (dir() / "cw").string() + " --dump=" + (dir() / "dump").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), kGraphs);
  for (const auto& e : found) {
    EXPECT_TRUE(fs::exists(e / "model.done")) << e;
    EXPECT_TRUE(fs::exists(dir() / "dump" / e.filename() / "model.log")) << e;
    EXPECT_EQ(read_text(e / "model.neff").find("--dump"), std::string::npos);
    EXPECT_EQ(read_text(e / "model.neff").find("--compile_workdir"), std::string::npos);
  }
  EXPECT_TRUE(fs::is_directory(dir() / "cw"));
}

TEST_F(FrameworkProtocol, AnalyzeSaysItNeedsTorchNeuronx) {
  auto r = launch({"--command", "analyze"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--command analyze needs torch-neuronx's graph analyser"), std::string::npos) << r.err;
}

} // namespace
} // namespace npc::test

namespace npc::test {
namespace {

TEST_F(FrameworkProtocol, ALockLeftByACompileKilledWithMinus9IsTakenOverByTheNextRun) {
  extract();
  auto found = entries_in(script_root());
  std::map<std::string, std::string> env = {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()},
                                            {"STANDIN_CC_FAULT", "hang"}};
  pid_t pid = start_tool("neuron_cc_wrapper", {"compile-entry", found[0].string()}, env, dir() / "killed.out");
  std::ignore = wait_until([&] { return fs::exists(found[0] / kLock); }, std::chrono::seconds(20));
  ASSERT_TRUE(fs::exists(found[0] / kLock));
  // Killed once the compiler runs (its invocation is logged), however slow
  // the machine (sanitizer builds are).
  std::ignore = wait_until([&] { return compiles() > 0; }, std::chrono::seconds(10));
  ASSERT_EQ(compiles(), 1u) << "the compiler never started";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto status = util::wait_child(pid);
  EXPECT_TRUE(status.signaled);
  ASSERT_TRUE(fs::exists(found[0] / kLock)) << "kill -9 leaves the lock, as it does the framework's";
  auto r = compile_pending();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  // The killed attempt, then one compile per graph.
  EXPECT_EQ(compiles(), kGraphs + 1);
  for (const auto& e : found) {
    EXPECT_TRUE(fs::exists(e / "model.done")) << e;
    EXPECT_FALSE(fs::exists(e / kLock)) << e;
  }
}

TEST_F(FrameworkProtocol, StaticScheduleTakesAContiguousShareAndHelpsOnlyTheEightBefore) {
  extract();
  auto plan = [&](std::vector<std::string> extra) {
    std::vector<std::string> ours = {"--command", "compile", "--dry-run", "--node_id", "9", "--world_size", "10"};
    ours.insert(ours.end(), extra.begin(), extra.end());
    auto r = launch(ours, {}, {{"NEURON_CC_FLAGS", "--cache_dir=" + script_root().string()}});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::size_t own = 0, other = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("would compile") == std::string::npos) continue;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      line.ends_with(" own") ? ++own : ++other;
    }
    return std::make_pair(own, other);
  };
  // 4 entries, 10 launchers: shares of one entry for launchers 0..3. Launcher
  // 9 owns none; it helps 1..8, so it plans the entries of 1, 2 and 3.
  EXPECT_EQ(plan({"--static_schedule"}), std::make_pair(std::size_t{0}, std::size_t{3}));
  // Round robin (the default): entry k to launcher k % 10; it may help all.
  // Each of the 4 is costlier than the work per slot of 10 launchers, so
  // the 2 costliest (its 2 slots' worth, --num_parallel 2) are every
  // launcher's own.
  EXPECT_EQ(plan({}), std::make_pair(std::size_t{2}, std::size_t{2}));
  EXPECT_EQ(compiles(), 0u);
}

} // namespace
} // namespace npc::test
