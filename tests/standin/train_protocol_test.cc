// standin_train --protocol torch-neuronx: the stand-in training script reads
// and writes the compile cache itself, as current torch-neuronx does. Runs
// the real binaries, with the stand-in compiler found as neuronx-cc on PATH,
// and checks the exact files, counts and exit statuses. Cache keys are
// recomputed here from the graphs the rank wrote, and the MD5 flag parts are
// constants worked out with md5sum, so a wrong key cannot pass by agreeing
// with itself.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "sha256.h"
#include "standin_fixture.h"

namespace standin::test {
namespace {

constexpr char kVersion[] = "2.16.372.0+4a9b2326";
// md5sum of the space-joined compiler flags, first 8 hex digits.
constexpr char kNoFlagsHash[] = "d41d8cd9";
constexpr char kO1Hash[] = "c0404986";  // "-O1"
constexpr char kQuotedFlagsHash[] = "e9d6d5e8";  // -O1 --model-type transformer --tensorizer-options=--a "b"

using Files = std::vector<std::string>;
const Files kExtractedFiles{"compile_flags.json", "model.hlo_module.pb"};
const Files kDoneFiles{"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff"};

std::string directory_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The 64-bit number the stand-in uses for torch-xla's graph hash: the first
// 8 bytes of SHA-256 read big-endian, in decimal.
std::string graph_part(const std::string& graph) {
  const Sha256Digest digest = sha256(graph);
  unsigned long long value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return std::to_string(value);
}

class StandinTrainProtocol : public StandinFixture {
 protected:
  std::string root() const { return path("cache"); }
  std::string workdir() const { return path("work"); }
  std::string version_dir(const std::string& cache_root) const {
    return cache_root + "/neuronxcc-" + kVersion;
  }
  std::string invocation_log() const { return path("invocations.log"); }

  // The stand-in compiler first on PATH, fast, with a realistic version.
  Env env_with(const Env& extra) const {
    Env env = fast_compiler_env();
    const char* inherited = std::getenv("PATH");
    env["PATH"] = directory_of(kCompilerBinary) + ":" + (inherited != nullptr ? inherited : "/usr/bin:/bin");
    env["STANDIN_CC_VERSION"] = kVersion;
    env["STANDIN_CC_INVOCATION_LOG"] = invocation_log();
    for (const auto& [name, value] : extra) env[name] = value;
    return env;
  }

  std::vector<std::string> train_argv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{kTrainBinary, "--protocol", "torch-neuronx", "--steps_this_run", "6",
                                  "--workdir", workdir()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  RunResult train(const Env& env, const std::vector<std::string>& args = {}) const {
    return run(train_argv(args), env_with(env));
  }

  std::size_t compiler_invocations() const {
    return exists(invocation_log()) ? split_lines(read_file(invocation_log())).size() : 0;
  }

  // Graph bytes by graph kind ("init", "train0", "eval"), from the .hlo
  // files rank 0 wrote.
  std::map<std::string, std::string> rank_graphs() const {
    std::map<std::string, std::string> graphs;
    const std::string rank_dir = workdir() + "/rank-0";
    for (const std::string& name : list_dir(rank_dir)) {
      if (!ends_with(name, ".hlo")) continue;
      const std::string kind = name.substr(std::string("MODULE_").size(), name.rfind('_') - 7);
      graphs[kind] = read_file(rank_dir + "/" + name);
    }
    return graphs;
  }

  // Entry directory of each graph kind, computed here from the graph bytes.
  std::map<std::string, std::string> expected_entries(const std::string& cache_root,
                                                      const std::string& flags_hash) const {
    std::map<std::string, std::string> entries;
    for (const auto& [kind, graph] : rank_graphs()) {
      entries[kind] = version_dir(cache_root) + "/MODULE_" + graph_part(graph) + "+" + flags_hash;
    }
    return entries;
  }

  std::set<std::string> entry_paths(const std::map<std::string, std::string>& entries) const {
    std::set<std::string> paths;
    for (const auto& [kind, entry] : entries) paths.insert(entry);
    return paths;
  }

  std::set<std::string> actual_entries(const std::string& cache_root) const {
    std::set<std::string> paths;
    for (const std::string& name : list_dir(version_dir(cache_root))) paths.insert(version_dir(cache_root) + "/" + name);
    return paths;
  }
};

std::string extracting_line(const std::string& entry) {
  return "Extracting graphs (" + entry +
         "/model.hlo_module.pb) for ahead-of-time parallel compilation. No compilation was done.";
}

std::string cached_line(const std::string& entry) {
  return "Using a cached neff at " + entry + "/model.neff. Exiting with a successfully compiled graph.";
}

TEST_F(StandinTrainProtocol, ExtractionWritesGraphAndFlagsOfEachEntryAndTheRootToThePathLog) {
  const std::string path_log = write_file("cache_path_log.txt", "stale\nlines\n");
  const RunResult result = train(
      {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"},
       {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log},
       {"NEURON_CC_FLAGS", "--cache_dir=" + root() + " -O1 --model-type \"transformer\" --log_level INFO "
                           "--retry_failed_compilation '--tensorizer-options=--a \"b\"' --dump /tmp/x"}});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;

  EXPECT_EQ(list_dir(root()), Files{std::string("neuronxcc-") + kVersion});
  const auto entries = expected_entries(root(), kQuotedFlagsHash);
  ASSERT_EQ(entries.size(), 3u);  // init, train0, eval
  EXPECT_EQ(actual_entries(root()), entry_paths(entries));
  const auto graphs = rank_graphs();
  std::set<std::string> expected_lines;
  for (const auto& [kind, entry] : entries) {
    EXPECT_EQ(list_dir(entry), kExtractedFiles) << entry << ": no lock or temporary file left";
    EXPECT_EQ(read_file(entry + "/model.hlo_module.pb"), graphs.at(kind));
    EXPECT_EQ(read_file(entry + "/compile_flags.json"),
              R"(["-O1", "--model-type", "transformer", "--tensorizer-options=--a \"b\""])");
    expected_lines.insert(extracting_line(entry));
  }
  const std::vector<std::string> printed = lines_with(result.out, "Extracting graphs (");
  EXPECT_EQ(std::set<std::string>(printed.begin(), printed.end()), expected_lines) << result.out;
  EXPECT_EQ(printed.size(), 3u);
  EXPECT_EQ(read_file(path_log), root()) << "one URL, the whole file";
  EXPECT_EQ(lines_with(result.out, "rank 0/1: steps=6 graphs=3 jit_compiles=0 cache_hits=0 ").size(), 1u);
  EXPECT_EQ(compiler_invocations(), 0u);
}

// Older releases: DIR/neuron-compile-cache for --cache_dir=DIR, nothing in
// the cache-path log; the same entries and lines otherwise.
TEST_F(StandinTrainProtocol, TheLegacyProtocolKeepsTheCacheBelowCacheDirAndWritesNoPathLog) {
  const std::string path_log = write_file("cache_path_log.txt", "stale\n");
  std::vector<std::string> legacy = train_argv({});
  legacy[2] = "torch-neuronx-legacy";
  const RunResult result = run(legacy, env_with({{"NEURON_EXTRACT_GRAPHS_ONLY", "1"},
                                                 {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log},
                                                 {"NEURON_CC_FLAGS", "--cache_dir=" + root()}}));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(list_dir(root()), Files{"neuron-compile-cache"});
  const std::string older_root = root() + "/neuron-compile-cache";
  const auto entries = expected_entries(older_root, kNoFlagsHash);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(actual_entries(older_root), entry_paths(entries));
  for (const auto& [kind, entry] : entries) {
    EXPECT_EQ(list_dir(entry), kExtractedFiles) << entry;
    EXPECT_EQ(lines_with(result.out, extracting_line(entry)).size(), 1u) << result.out;
  }
  EXPECT_EQ(read_file(path_log), "stale\n") << "older releases wrote nothing there";

  // Just in time it compiles into the same place.
  const RunResult jit = run(legacy, env_with({{"NEURON_CC_FLAGS", "--cache_dir=" + root()}}));
  ASSERT_EQ(jit.exit_code, 0) << jit.out << jit.err;
  for (const auto& [kind, entry] : entries) EXPECT_EQ(list_dir(entry), kDoneFiles) << entry;
  EXPECT_EQ(compiler_invocations(), 3u);
}

TEST_F(StandinTrainProtocol, JitCompilesEachGraphOnceAndASecondRunHitsTheCache) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root() + " -O1"}};
  const RunResult first = train(env);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(compiler_invocations(), 3u);
  EXPECT_EQ(lines_with(first.out, "rank 0/1: steps=6 graphs=3 jit_compiles=3 cache_hits=0 ").size(), 1u)
      << first.out;

  const auto entries = expected_entries(root(), kO1Hash);
  ASSERT_EQ(entries.size(), 3u);  // init, train0, eval
  EXPECT_EQ(actual_entries(root()), entry_paths(entries));
  const auto graphs = rank_graphs();
  for (const auto& [kind, entry] : entries) {
    EXPECT_EQ(list_dir(entry), kDoneFiles) << entry;
    EXPECT_EQ(read_file(entry + "/model.done"), "");
    EXPECT_EQ(read_file(entry + "/compile_flags.json"), R"(["-O1"])");
    const std::string neff = read_file(entry + "/model.neff");
    EXPECT_EQ(header_field(neff, "graph-sha256"), sha256_hex(graphs.at(kind))) << entry;
    EXPECT_EQ(header_field(neff, "flags"), "--target=trn1 -O1") << entry;
    EXPECT_EQ(header_field(neff, "compiler-version"), kVersion);
  }

  const RunResult second = train(env);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(compiler_invocations(), 3u) << "nothing compiled again";
  EXPECT_EQ(lines_with(second.out, "rank 0/1: steps=6 graphs=3 jit_compiles=0 cache_hits=3 ").size(), 1u)
      << second.out;
  std::set<std::string> expected_lines;
  for (const auto& [kind, entry] : entries) expected_lines.insert(cached_line(entry));
  const std::vector<std::string> printed = lines_with(second.out, "Using a cached neff at ");
  EXPECT_EQ(std::set<std::string>(printed.begin(), printed.end()), expected_lines) << second.out;
}

TEST_F(StandinTrainProtocol, ScriptCacheDirWinsOverTheEnvironmentsCacheDir) {
  const std::string env_root = path("env-cache");
  const std::string script_root = path("script-cache");
  const std::string path_log = path("cache_path_log.txt");
  // The protocol chosen through the environment this time.
  const Env env{{"STANDIN_TRAIN_PROTOCOL", "torch-neuronx"}, {"NEURON_CC_FLAGS", "--cache_dir " + env_root},
                {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log}};
  std::vector<std::string> argv{kTrainBinary, "--steps_this_run", "6", "--workdir", workdir(),
                                "--script_cache_dir", script_root};
  Env extract = env;
  extract["NEURON_EXTRACT_GRAPHS_ONLY"] = "yes";
  const RunResult extracted = run(argv, env_with(extract));
  ASSERT_EQ(extracted.exit_code, 0) << extracted.out << extracted.err;
  EXPECT_EQ(read_file(path_log), script_root);

  const RunResult compiled = run(argv, env_with(env));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.out << compiled.err;
  EXPECT_FALSE(exists(env_root));
  // Both --cache_dir options are the framework's: no compiler flags are left.
  const auto entries = expected_entries(script_root, kNoFlagsHash);
  ASSERT_EQ(entries.size(), 3u);  // init, train0, eval
  EXPECT_EQ(actual_entries(script_root), entry_paths(entries));
  for (const auto& [kind, entry] : entries) {
    EXPECT_EQ(list_dir(entry), kDoneFiles) << entry;
    EXPECT_EQ(read_file(entry + "/compile_flags.json"), "[]");
  }
  EXPECT_EQ(compiler_invocations(), 3u);
}

TEST_F(StandinTrainProtocol, CacheUrlIsTheRootWhenThereIsNoCacheDir) {
  const std::string path_log = path("cache_path_log.txt");
  const RunResult result =
      train({{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log},
             {"NEURON_COMPILE_CACHE_URL", "file://" + root() + "/"}});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto entries = expected_entries(root(), kNoFlagsHash);
  ASSERT_EQ(entries.size(), 3u);  // init, train0, eval
  EXPECT_EQ(actual_entries(root()), entry_paths(entries));
  EXPECT_EQ(read_file(path_log), root());
}

TEST_F(StandinTrainProtocol, TwoRanksCompileEachGraphOnce) {
  // Compiles slow enough that the second rank finds the first one's lock.
  const RunResult result = train(
      {{"NEURON_CC_FLAGS", "--cache_dir=" + root()}, {"STANDIN_CC_BASE_MS", "200"}}, {"--nproc_per_node", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(lines_with(result.out, "standin_train: total: ranks=2 graphs=3 jit_compiles=3 cache_hits=3 ").size(),
            1u)
      << result.out;
  std::set<std::string> compiled_graphs;
  for (const std::string& line : split_lines(read_file(invocation_log()))) {
    compiled_graphs.insert(line.substr(line.find(' ') + 1, 64));
  }
  EXPECT_EQ(compiler_invocations(), 3u);
  EXPECT_EQ(compiled_graphs.size(), 3u);
  const std::set<std::string> entries = actual_entries(root());
  ASSERT_EQ(entries.size(), 3u);
  for (const std::string& entry : entries) EXPECT_EQ(list_dir(entry), kDoneFiles) << entry;
}

TEST_F(StandinTrainProtocol, AnExistingLockMakesTheRankWaitUntilItIsRemoved) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}};
  Env extract = env;
  extract["NEURON_EXTRACT_GRAPHS_ONLY"] = "1";
  ASSERT_EQ(train(extract).exit_code, 0);
  const std::string entry = expected_entries(root(), kNoFlagsHash).at("init");
  const std::string lock = write_file("lock-placeholder", "");
  ASSERT_EQ(std::rename(lock.c_str(), (entry + "/model.hlo_module.pb.lock").c_str()), 0);

  Child rank = start(train_argv({}), env_with(env));
  // Only the files are looked at from the thread; the Child is the main
  // thread's to wait for.
  bool waited_without_compiling = false;
  std::thread unlocker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    waited_without_compiling = !exists(entry + "/model.done") && compiler_invocations() == 0;
    ::unlink((entry + "/model.hlo_module.pb.lock").c_str());
  });
  const RunResult result = rank.wait(kStandinTimeout);
  unlocker.join();
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(waited_without_compiling);
  EXPECT_EQ(lines_with(result.out, "Another process must be compiling"),
            std::vector<std::string>{"Another process must be compiling " + entry + ", waiting..."});
  EXPECT_EQ(lines_with(result.out, "rank 0/1: steps=6 graphs=3 jit_compiles=3 cache_hits=0 ").size(), 1u);
  std::smatch wait;
  ASSERT_TRUE(std::regex_search(result.out, wait, std::regex(R"(compile_wait_s=(\d+\.\d+))")));
  EXPECT_GE(std::stod(wait[1]), 0.5) << "the wait counts as compile wait";
  EXPECT_EQ(list_dir(entry), kDoneFiles);
}

TEST_F(StandinTrainProtocol, WaitingForALockGivesUpAfterTheConfiguredTime) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}, {"STANDIN_TRAIN_LOCK_WAIT_S", "0.3"}};
  Env extract = env;
  extract["NEURON_EXTRACT_GRAPHS_ONLY"] = "1";
  ASSERT_EQ(train(extract).exit_code, 0);
  const std::string lock = expected_entries(root(), kNoFlagsHash).at("init") + "/model.hlo_module.pb.lock";
  ASSERT_EQ(std::rename(write_file("lock", "").c_str(), lock.c_str()), 0);

  const RunResult result = train(env);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("gave up after 0.3 s waiting for lock '" + lock + "'"), std::string::npos)
      << result.err;
  EXPECT_TRUE(exists(lock)) << "someone else's lock is never removed";
  EXPECT_EQ(compiler_invocations(), 0u);
}

TEST_F(StandinTrainProtocol, ACachedFailureIsNotRetriedWithoutRetryFailedCompilation) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}};
  Env extract = env;
  extract["NEURON_EXTRACT_GRAPHS_ONLY"] = "1";
  ASSERT_EQ(train(extract).exit_code, 0);
  const std::string entry = expected_entries(root(), kNoFlagsHash).at("init");
  ASSERT_EQ(std::rename(write_file("log", "an old compiler error\n").c_str(), (entry + "/model.log").c_str()), 0);

  const RunResult failed = train(env);
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_EQ(lines_with(failed.out, "Got a cached failed neff"),
            std::vector<std::string>{"Got a cached failed neff at " + entry +
                                     "/model.log. Will skip compilation, please set --retry_failed_compilation"});
  EXPECT_NE(failed.err.find("(cached failure in " + entry + "/model.log)"), std::string::npos) << failed.err;
  EXPECT_EQ(compiler_invocations(), 0u);

  const RunResult retried = train({{"NEURON_CC_FLAGS", "--cache_dir=" + root() + " --retry_failed_compilation"}});
  ASSERT_EQ(retried.exit_code, 0) << retried.out << retried.err;
  EXPECT_EQ(compiler_invocations(), 3u);
  EXPECT_EQ(list_dir(entry), kDoneFiles) << "the old failure log goes once the retry succeeds";
}

TEST_F(StandinTrainProtocol, ACompilerFailureIsCachedInModelLog) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}};
  Env faulty = env;
  faulty["STANDIN_CC_FAULT"] = "fail";
  const RunResult failed = train(faulty);
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_TRUE(std::regex_search(failed.err, std::regex(R"(compile failed for \S+MODULE_init_\w+\.hlo \(exit 1\))")))
      << failed.err;
  const std::string entry = expected_entries(root(), kNoFlagsHash).at("init");
  EXPECT_EQ(list_dir(entry), (Files{"compile_flags.json", "model.hlo_module.pb", "model.log"}))
      << "no lock, NEFF or temporary file left";
  EXPECT_NE(read_file(entry + "/model.log").find("Compiler status ERROR"), std::string::npos);
  EXPECT_EQ(compiler_invocations(), 1u);

  const RunResult again = train(env);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(lines_with(again.out, "Got a cached failed neff at " + entry + "/model.log").size(), 1u) << again.out;
  EXPECT_EQ(compiler_invocations(), 1u);
}

TEST_F(StandinTrainProtocol, AnErrorWhileHoldingTheLockRemovesIt) {
  const Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}};
  Env extract = env;
  extract["NEURON_EXTRACT_GRAPHS_ONLY"] = "1";
  ASSERT_EQ(train(extract).exit_code, 0);
  // A directory where the rank's NEFF copy should go: copying the compiled
  // NEFF out of the entry throws while the lock is held.
  std::string init_hlo;
  for (const std::string& name : list_dir(workdir() + "/rank-0")) {
    if (name.rfind("MODULE_init_", 0) == 0) init_hlo = workdir() + "/rank-0/" + name;
  }
  ASSERT_FALSE(init_hlo.empty());
  const std::string blocked = init_hlo.substr(0, init_hlo.size() - 4) + ".neff";
  std::filesystem::create_directories(blocked + "/in-the-way");

  const RunResult result = train(env);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot copy"), std::string::npos) << result.err;
  EXPECT_EQ(list_dir(expected_entries(root(), kNoFlagsHash).at("init")), kDoneFiles);
}

TEST_F(StandinTrainProtocol, AKilledRankLeavesItsLockBehind) {
  Env env{{"NEURON_CC_FLAGS", "--cache_dir=" + root()}, {"STANDIN_CC_FAULT", "hang"},
          {"RANK", "0"}, {"WORLD_SIZE", "1"}};
  Child rank = start(train_argv({}), env_with(env));
  ASSERT_TRUE(npc::test::wait_until([&] { return compiler_invocations() > 0; }, std::chrono::seconds(10)));
  ASSERT_EQ(compiler_invocations(), 1u);
  rank.kill(SIGKILL);
  const RunResult killed = rank.wait(kStandinTimeout);
  ASSERT_TRUE(killed.signaled && killed.signal == SIGKILL)
      << "the rank ended before the kill landed, so nothing was killed: " << killed.describe();
  // The hanging compiler was the rank's child; end it too.
  const pid_t compiler = std::stoi(read_file(invocation_log()));
  ::kill(compiler, SIGKILL);

  const std::set<std::string> entries = actual_entries(root());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(exists(*entries.begin() + "/model.hlo_module.pb.lock"));
  EXPECT_EQ(read_file(*entries.begin() + "/model.hlo_module.pb.lock"), "") << "no owner facts";
}

TEST_F(StandinTrainProtocol, BadSettingsAreUsageErrors) {
  const RunResult bad_choice = run({kTrainBinary, "--protocol=pytorch"}, env_with({}));
  EXPECT_EQ(bad_choice.exit_code, 2);
  EXPECT_NE(bad_choice.err.find("argument --protocol: invalid choice: 'pytorch'"), std::string::npos)
      << bad_choice.err;

  const RunResult bad_env =
      run({kTrainBinary, "--steps_this_run", "1"}, env_with({{"STANDIN_TRAIN_PROTOCOL", "nope"}}));
  EXPECT_EQ(bad_env.exit_code, 2);
  EXPECT_NE(bad_env.err.find("STANDIN_TRAIN_PROTOCOL: invalid choice: 'nope'"), std::string::npos) << bad_env.err;

  const RunResult bad_quote = train({{"NEURON_CC_FLAGS", "--cache_dir='" + root()}});
  EXPECT_EQ(bad_quote.exit_code, 2);
  EXPECT_NE(bad_quote.err.find("NEURON_CC_FLAGS: no closing quotation"), std::string::npos) << bad_quote.err;

  const RunResult no_compiler = train({{"NEURON_CC", path("no-such-compiler")}});
  EXPECT_EQ(no_compiler.exit_code, 2);
  EXPECT_NE(no_compiler.err.find("NEURON_CC="), std::string::npos) << no_compiler.err;
}

}  // namespace
}  // namespace standin::test
