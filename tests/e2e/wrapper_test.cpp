// neuron_cc_wrapper against the stand-in compiler: hit, miss, extraction,
// cached failure and retry, --no_cache, compile-entry, key, error paths, and
// many processes asking for the same graphs at once.

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sstream>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <npc/cache/store.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/compile/target.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>

#include "test_support.hpp"
#include "wait.hpp"

namespace npc::test {
namespace {

class Wrapper : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    // The target must come from what each test sets, not from the host's.
    ::unsetenv(compile::kTargetOverrideVariable);
  }
  // What the wrapper adds when neither flags nor environment name a target.
  static std::string machine_target() {
    return compile::detect_target(compile::kDmiProductNamePath).value_or("trn1");
  }
  static std::string version_dir() { return std::string("neuronxcc-") + kStandinVersion; }
  fs::path graph(const std::string& name, const std::string& text) {
    fs::path p = dir() / "graphs" / name;
    write_text(p, text);
    return p;
  }
  RunResult compile(const fs::path& g, const fs::path& out, std::vector<std::string> flags = {},
                    std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"compile", "--graph", g.string(), "--output", out.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    return run_tool("neuron_cc_wrapper", args, std::move(env));
  }
  // The stand-in writes which graph and flags it compiled into the NEFF.
  static std::string neff_line(const fs::path& neff, const std::string& field) {
    std::string text = read_text(neff);
    auto at = text.find(field + ": ");
    if (at == std::string::npos) return "<no " + field + ">";
    auto end = text.find('\n', at);
    return text.substr(at + field.size() + 2, end - at - field.size() - 2);
  }
};

TEST_F(Wrapper, MissCompilesPublishesAndThenHits) {
  env_.erase("NEURON_PLATFORM_TARGET_OVERRIDE"); // the machine's own target, as on a Trainium host
  fs::path g = graph("a.hlo", "HloModule a\nENTRY e { ROOT p = f32[4] parameter(0) }\n");
  auto first = compile(g, dir() / "a.neff", {"--model-type=transformer"});
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_EQ(compiles(), 1u);
  ASSERT_EQ(entries().size(), 1u);
  fs::path entry = entries()[0];
  for (const char* f : {"model.hlo_module.pb", "compile_flags.json", "model.neff", "model.done", "npc-entry.json"})
    EXPECT_TRUE(fs::exists(entry / f)) << f;
  EXPECT_FALSE(fs::exists(entry / "model.log"));
  EXPECT_FALSE(fs::exists(entry / "npc-compile.lock")); // released and removed
  EXPECT_EQ(read_text(entry / "compile_flags.json"), "[\"--model-type=transformer\"]\n");
  EXPECT_EQ(read_text(entry / "model.hlo_module.pb"), read_text(g));
  EXPECT_EQ(read_text(dir() / "a.neff"), read_text(entry / "model.neff"));
  EXPECT_EQ(neff_line(dir() / "a.neff", "graph-sha256"), util::sha256_hex(read_text(g)));
  // The machine's target is added only because the flags named no target.
  EXPECT_EQ(neff_line(dir() / "a.neff", "flags"), "--model-type=transformer --target=" + machine_target());
  // Without a target from the machine, the fallback is said once.
  const std::string warning = "cannot tell the compile target from /sys/class/dmi/id/product_name";
  if (!compile::detect_target(compile::kDmiProductNamePath)) {
    EXPECT_EQ(first.err.find(warning), first.err.rfind(warning)) << first.err;
    EXPECT_NE(first.err.find("set NEURON_PLATFORM_TARGET_OVERRIDE to one of trn1, trn1n, trn2, inf2"),
              std::string::npos)
        << first.err;
  } else {
    EXPECT_EQ(first.err.find(warning), std::string::npos) << first.err;
  }
  // The flags part of the key is torch-neuronx's: md5 of the joined flags;
  // printf '%s' '--model-type=transformer' | md5sum -> abb267659a2ad6ca...
  EXPECT_EQ(entry.filename().string(),
            "MODULE_" + util::sha256_hex(read_text(g)).substr(0, 20) + "+abb26765");
  auto meta = cache::read_entry_meta(entry);
  ASSERT_TRUE(meta.ok()) << meta.error();
  ASSERT_EQ(meta->attempts.size(), 1u);
  EXPECT_EQ(meta->attempts[0].outcome, "success");
  EXPECT_EQ(meta->attempts[0].exit, "exit code 0");
  EXPECT_GT(meta->attempts[0].peak_rss_bytes, 0u);
  EXPECT_EQ(*meta->neff_sha256, util::sha256_hex(read_text(entry / "model.neff")));

  auto second = compile(g, dir() / "b.neff", {"--model-type=transformer"});
  ASSERT_EQ(second.exit_code, 0) << second.describe();
  EXPECT_EQ(compiles(), 1u); // served from the cache
  EXPECT_NE(second.out.find("Using a cached neff at " + (entry / "model.neff").string()), std::string::npos)
      << second.out;
  EXPECT_EQ(read_text(dir() / "b.neff"), read_text(entry / "model.neff"));
}

// The entry removed while the compile runs (an eviction with --ttl 0, a
// `--command clean`): what the wrapper was asked for still stands, so it
// stores the graph again and compiles it, and the caller gets its NEFF.
TEST_F(Wrapper, AnEntryRemovedWhileItCompilesIsStoredAndCompiledAgain) {
  fs::path g = graph("slow.hlo", "HloModule slow\n// standin-cost-ms: 1500\n");
  fs::path out = dir() / "slow.neff";
  Child wrapper({tool_path("neuron_cc_wrapper").string(), "compile", "--graph", g.string(), "--output", out.string()},
                options(), dir() / "slow");
  // Removed once the compiler runs (it logs its start): the lock alone is
  // taken before the compile's work folder is made.
  fs::path held;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& e : entries())
          if (fs::exists(e / "model.hlo_module.pb.lock")) held = e;
        return !held.empty() && compiles() == 1;
      },
      std::chrono::seconds(20)));
  // As eviction and clean do: renamed away at once, then deleted.
  fs::rename(held, dir() / "trash");
  fs::remove_all(dir() / "trash");
  RunResult res = wrapper.wait();
  ASSERT_EQ(res.exit_code, 0) << res.describe();
  EXPECT_NE(res.err.find(held.string() + " was removed by another process; storing its graph again"),
            std::string::npos)
      << res.err;
  EXPECT_EQ(compiles(), 2u);
  EXPECT_EQ(entries(), std::vector<fs::path>{held});
  EXPECT_TRUE(fs::exists(held / "model.done"));
  EXPECT_EQ(read_text(out), read_text(held / "model.neff"));
}

// Removed as soon as its lock is taken: before the compile's work folder is
// made, or just after (which one is the race's). Either way the wrapper
// stores the graph again and delivers the NEFF; the compile that lost its
// entry, if it had started, is the one compile too many.
TEST_F(Wrapper, AnEntryRemovedAsSoonAsItIsLockedIsStoredAndCompiledAgain) {
  fs::path g = graph("slow.hlo", "HloModule slow\n// standin-cost-ms: 1500\n");
  fs::path out = dir() / "slow.neff";
  Child wrapper({tool_path("neuron_cc_wrapper").string(), "compile", "--graph", g.string(), "--output", out.string()},
                options(), dir() / "slow");
  fs::path held;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& e : entries())
          if (fs::exists(e / "model.hlo_module.pb.lock")) held = e;
        return !held.empty();
      },
      std::chrono::seconds(20), std::chrono::milliseconds(1)));
  // As eviction and clean do: renamed away at once, then deleted.
  fs::rename(held, dir() / "trash");
  fs::remove_all(dir() / "trash");
  RunResult res = wrapper.wait();
  ASSERT_EQ(res.exit_code, 0) << res.describe();
  EXPECT_NE(res.err.find(held.string() + " was removed by another process; storing its graph again"),
            std::string::npos)
      << res.err;
  EXPECT_GE(compiles(), 1u);
  EXPECT_LE(compiles(), 2u);
  EXPECT_EQ(entries(), std::vector<fs::path>{held});
  EXPECT_TRUE(fs::exists(held / "model.done"));
  EXPECT_EQ(read_text(out), read_text(held / "model.neff"));
}

// While a compile waits for the entry's lock, an eviction removes the entry
// and another process starts storing the graph again: it has made the folder
// and written compile_flags.json, not yet the graph, when the lock comes
// free. The waiting compile stores its own graph there and compiles: the
// entry is the same one, and this caller holds its graph.
TEST_F(Wrapper, AnEntryRemadeWithoutItsGraphWhileTheLockWasAwaitedGetsTheGraph) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  RunResult extracted = run_tool("neuron_cc_wrapper", {"compile", "--graph", g.string(), "--output",
                                                       (dir() / "x.neff").string()},
                                 {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}});
  ASSERT_EQ(extracted.exit_code, 0) << extracted.describe();
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries().front();
  cache::Cache cache(entry.parent_path().parent_path());
  auto taken = cache.entry(entry).lock(std::chrono::seconds(1));
  ASSERT_TRUE(taken.ok() && std::holds_alternative<storage::Lock>(*taken)) << "the test could not take the lock";
  storage::Lock lock = std::move(std::get<storage::Lock>(*taken));

  fs::path out = dir() / "a.neff";
  Child waiter({tool_path("neuron_cc_wrapper").string(), "compile", "--graph", g.string(), "--output", out.string()},
               options(), dir() / "waiter");
  ASSERT_TRUE(wait_until([&] { return read_text(dir() / "waiter.err").find("waiting for the lock") != std::string::npos; },
                         std::chrono::seconds(20)));
  // The removal and the half-done store, in one step: the waiter never sees
  // the entry missing, which is the case the wrapper already handles.
  fs::path remade = dir() / "remade";
  fs::create_directories(remade);
  fs::copy_file(entry / "compile_flags.json", remade / "compile_flags.json");
  ASSERT_EQ(::syscall(SYS_renameat2, AT_FDCWD, remade.c_str(), AT_FDCWD, entry.c_str(), RENAME_EXCHANGE), 0)
      << std::strerror(errno);
  ASSERT_TRUE(lock.release().ok());
  fs::remove_all(remade);

  RunResult res = waiter.wait();
  ASSERT_EQ(res.exit_code, 0) << res.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(entries(), std::vector<fs::path>{entry});
  EXPECT_EQ(read_text(entry / "model.hlo_module.pb"), read_text(g));
  EXPECT_TRUE(fs::exists(entry / "model.done"));
  EXPECT_EQ(read_text(out), read_text(entry / "model.neff"));
}

// Sixteen wrappers asking for the same two graphs at once, as the ranks of
// a training run do: every one is counted (cache/usage_stats.hpp), each
// graph's one compile as a miss and every other answer as a hit, with the
// compile time it saved.
TEST_F(Wrapper, ManyWrappersAtOnceAreEachCountedOnce) {
  constexpr int kWrappers = 16;
  fs::path graphs[2] = {graph("a.hlo", "HloModule a\n// standin-cost-ms: 300\n"),
                        graph("b.hlo", "HloModule b\n// standin-cost-ms: 300\n")};
  std::vector<Child> children;
  for (int w = 0; w < kWrappers; ++w) {
    const fs::path out = dir() / ("out" + std::to_string(w) + ".neff");
    children.emplace_back(std::vector<std::string>{tool_path("neuron_cc_wrapper").string(), "compile", "--graph",
                                                   graphs[w % 2].string(), "--output", out.string()},
                          options(), dir() / ("w" + std::to_string(w)));
  }
  for (auto& child : children) {
    RunResult r = child.wait();
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
  ASSERT_EQ(compiles(), 2u);
  double recorded = 0;
  for (const auto& e : entries()) recorded += cache::read_entry_meta(e)->last_success()->wall_seconds;
  auto stats = run_tool("neuron_cache", {"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.describe();
  auto usage = nlohmann::json::parse(stats.out)["usage"]["programs"]["neuron_cc_wrapper"];
  EXPECT_EQ(usage["misses"], 2);
  EXPECT_EQ(usage["hits"], kWrappers - 2);
  EXPECT_EQ(usage["failed"], 0);
  EXPECT_NEAR(usage["compile_seconds"].get<double>(), recorded, 1e-6);
  // Each hit saved its graph's compile: 7 of each graph's 8 answers.
  EXPECT_NEAR(usage["saved_seconds"].get<double>(), recorded * (kWrappers / 2 - 1), 1e-6);
}

// A cached failure given back is counted as a failure, not a hit.
TEST_F(Wrapper, ACachedFailureIsCountedAsAFailure) {
  fs::path g = graph("bad.hlo", "HloModule bad\n");
  auto first = compile(g, dir() / "bad.neff", {}, {{"STANDIN_CC_FAULT", "exit70"}});
  ASSERT_EQ(first.exit_code, 1) << first.describe();
  auto second = compile(g, dir() / "bad.neff");
  ASSERT_NE(second.exit_code, 0) << second.describe();
  auto stats = run_tool("neuron_cache", {"--json", "stats"});
  auto usage = nlohmann::json::parse(stats.out)["usage"]["programs"]["neuron_cc_wrapper"];
  EXPECT_EQ(usage["failed"], 2);
  EXPECT_EQ(usage["hits"], 0);
  EXPECT_EQ(usage["misses"], 0);
  EXPECT_GT(usage["compile_seconds"].get<double>(), 0) << "the first one compiled";
}

// An output that passes the check before the compile but cannot take the
// NEFF (a full device): the compile that ran is cached and counted as the
// miss it was; a hit that cannot be written is no hit, and compiles nothing.
TEST_F(Wrapper, ANeffTheOutputCannotTakeIsCountedAsTheMissItWas) {
  fs::path g = graph("full.hlo", "HloModule full\n");
  const fs::path full = dir() / "full";
  fs::create_symlink("/dev/full", full);
  const std::string error =
      "neuron_cc_wrapper: error: --output: cannot write " + full.string() + ": No space left on device\n";
  auto usage = [&] {
    auto stats = run_tool("neuron_cache", {"--json", "stats"});
    auto counts = nlohmann::json::parse(stats.out)["usage"]["programs"].value("neuron_cc_wrapper",
                                                                               nlohmann::json::object());
    return nlohmann::json{{"hits", counts.value("hits", 0)}, {"misses", counts.value("misses", 0)}};
  };
  auto miss = compile(g, full);
  EXPECT_EQ(miss.exit_code, 3) << miss.describe();
  EXPECT_EQ(miss.err, error);
  EXPECT_EQ(compiles(), 1u);
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_TRUE(fs::exists(entries().front() / "model.done"));
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 1}}));
  auto hit = compile(g, full);
  EXPECT_EQ(hit.exit_code, 3) << hit.describe();
  EXPECT_EQ(hit.err, error);
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 1}}));
}

// NEURON_COMPILE_CACHE_STATS=0: nothing counted, nothing written for it;
// a value that is neither yes nor no is an error before anything is done.
TEST_F(Wrapper, CountingCanBeTurnedOffAndABadValueIsAnError) {
  fs::path g = graph("quiet.hlo", "HloModule quiet\n");
  ASSERT_EQ(compile(g, dir() / "q1.neff", {}, {{"NEURON_COMPILE_CACHE_STATS", "0"}}).exit_code, 0);
  ASSERT_EQ(compile(g, dir() / "q2.neff", {}, {{"NEURON_COMPILE_CACHE_STATS", "off"}}).exit_code, 0);
  EXPECT_FALSE(fs::exists(cache_root() / ".npc" / "stats"));
  auto bad = compile(g, dir() / "q3.neff", {}, {{"NEURON_COMPILE_CACHE_STATS", "sometimes"}});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_EQ(bad.err, "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_STATS=sometimes: not a yes/no value; set it to "
                     "1 (yes) or 0 (no), or unset it\n");
  EXPECT_FALSE(fs::exists(dir() / "q3.neff"));
  ASSERT_EQ(compile(g, dir() / "q4.neff").exit_code, 0);
  auto stats = run_tool("neuron_cache", {"--json", "stats"});
  EXPECT_EQ(nlohmann::json::parse(stats.out)["usage"]["total"]["hits"], 1);
}

TEST_F(Wrapper, FlagsFromEnvironmentComeFirstAndCacheOptionsAreRemoved) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  env_["NEURON_CC_FLAGS"] = "--cache_dir " + (dir() / "c").string() + " -O2 --cache_ttl=3 --target trn2";
  auto r = compile(g, dir() / "a.neff", {"--auto-cast=none", "--retry_failed_compilation"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(read_text(entries()[0] / "compile_flags.json"), "[\"-O2\",\"--target\",\"trn2\",\"--auto-cast=none\"]\n");
  EXPECT_EQ(neff_line(dir() / "a.neff", "flags"), "-O2 --target trn2 --auto-cast=none");
  EXPECT_EQ(neff_line(dir() / "a.neff", "target"), "trn2");
}

TEST_F(Wrapper, FlagsReachTheCompilerAsExactWords) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  env_["NEURON_CC_FLAGS"] = "--cache_dir=" + (dir() / "c").string() +
                            " '--internal-x=a b;c' \"--internal-y=$(touch pwned)\"";
  auto r = compile(g, dir() / "a.neff");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text(entries()[0] / "compile_flags.json"),
            "[\"--internal-x=a b;c\",\"--internal-y=$(touch pwned)\"]\n");
  EXPECT_FALSE(fs::exists(dir() / "pwned"));
}

// The static wrapper lends OpenSSL its CPU vector through a one-variable
// environment for a moment at start (main/openssl_cpu_at_start.cpp): the
// compiler it runs gets the caller's environment as it was, with a user's
// own OPENSSL_ia32cap (a mask, here) as given.
TEST_F(Wrapper, TheCompilerGetsTheCallersEnvironmentAsItWas) {
  fs::path seen = dir() / "environments";
  fs::path compiler = dir() / "bin" / "neuronx-cc";
  write_executable(compiler, "#!/bin/sh\nenv >> " + seen.string() +
                                 "\necho '--' >> " + seen.string() +
                                 "\n[ \"$1\" = --version ] && { echo 'NeuronX Compiler version 2.14.213.0'; exit 0; }\nexit 1\n");
  env_["NEURON_CC"] = compiler.string();
  env_["MY_VARIABLE"] = "kept";
  fs::path g = graph("a.hlo", "HloModule a\n");
  auto environments = [&] {
    std::vector<std::vector<std::string>> all(1);
    std::istringstream text(read_text(seen));
    for (std::string line; std::getline(text, line);) {
      if (line == "--") all.emplace_back();
      else all.back().push_back(line);
    }
    all.pop_back();
    return all;
  };
  auto named = [](const std::vector<std::string>& environment, const std::string& name) {
    std::vector<std::string> lines;
    for (const auto& line : environment)
      if (line.starts_with(name + "=")) lines.push_back(line);
    return lines;
  };
  auto r = compile(g, dir() / "a.neff");
  EXPECT_EQ(r.exit_code, 1) << r.describe(); // the script compiles nothing
  auto first = environments();
  ASSERT_EQ(first.size(), 2u) << "--version, then the compile";
  for (const auto& environment : first) {
    EXPECT_EQ(named(environment, "OPENSSL_ia32cap"), std::vector<std::string>{});
    EXPECT_EQ(named(environment, "MY_VARIABLE"), std::vector<std::string>{"MY_VARIABLE=kept"});
  }
  fs::remove(seen);
  env_["OPENSSL_ia32cap"] = "~0x200000000000000";
  env_["NEURON_CC_FLAGS"] += " --retry_failed_compilation";
  r = compile(g, dir() / "a.neff");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto second = environments();
  ASSERT_EQ(second.size(), 1u) << "the version is remembered";
  EXPECT_EQ(named(second[0], "OPENSSL_ia32cap"), std::vector<std::string>{"OPENSSL_ia32cap=~0x200000000000000"});
}

TEST_F(Wrapper, DifferentFlagsAreDifferentEntries) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  ASSERT_EQ(compile(g, dir() / "1.neff", {"-O1"}).exit_code, 0);
  ASSERT_EQ(compile(g, dir() / "2.neff", {"-O2"}).exit_code, 0);
  ASSERT_EQ(compile(g, dir() / "3.neff", {"-O1"}).exit_code, 0);
  EXPECT_EQ(entries().size(), 2u);
  EXPECT_EQ(compiles(), 2u);
  auto name = [](const fs::path& p) { return p.filename().string(); };
  EXPECT_EQ(name(entries()[0]).substr(0, 27), name(entries()[1]).substr(0, 27)); // same graph hash
}

TEST_F(Wrapper, ExtractionStoresPendingEntryLogsPathAndCompilesNothing) {
  fs::path g = graph("a.hlo", "HloModule extract\n");
  fs::path path_log = dir() / "paths.log";
  auto r = compile(g, dir() / "a.neff", {},
                   {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log.string()}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 0u);
  ASSERT_EQ(entries().size(), 1u);
  fs::path pb = entries()[0] / "model.hlo_module.pb";
  EXPECT_EQ(r.out, "Extracting graphs (" + pb.string() +
                       ") for ahead-of-time parallel compilation. No compilation was done.\n");
  EXPECT_EQ(read_text(path_log), pb.string() + "\n");
  EXPECT_TRUE(fs::exists(dir() / "a.neff"));
  EXPECT_EQ(fs::file_size(dir() / "a.neff"), 0u); // placeholder
  EXPECT_FALSE(fs::exists(entries()[0] / "model.neff"));
  EXPECT_FALSE(fs::exists(entries()[0] / "model.done"));
  auto ls = run_tool("neuron_cache", {"ls"});
  EXPECT_NE(ls.out.find("pending"), std::string::npos) << ls.out;
}

TEST_F(Wrapper, ManyProcessesAppendToThePathLogWithoutLosingLines) {
  constexpr int kProcesses = 24;
  fs::path path_log = dir() / "paths.log";
  std::vector<fs::path> graphs;
  for (int i = 0; i < kProcesses; ++i) graphs.push_back(graph("g" + std::to_string(i), "HloModule m" + std::to_string(i) + "\n"));
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto r = compile(graphs[static_cast<size_t>(i)], dir() / ("o" + std::to_string(i)), {},
                       {{"NEURON_EXTRACT_GRAPHS_ONLY", "true"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log.string()}});
      ::_exit(r.exit_code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(count_lines(path_log), static_cast<size_t>(kProcesses));
  EXPECT_EQ(entries().size(), static_cast<size_t>(kProcesses));
  std::string text = read_text(path_log);
  for (const auto& e : entries())
    EXPECT_NE(text.find((e / "model.hlo_module.pb").string() + "\n"), std::string::npos) << e;
}

TEST_F(Wrapper, AnAlteredNeffIsRecompiledWithOneWarning) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  ASSERT_EQ(compile(g, dir() / "a.neff").exit_code, 0);
  ASSERT_EQ(entries().size(), 1u);
  fs::path entry = entries()[0];
  write_text(entry / "model.neff", read_text(entry / "model.neff") + "altered");
  auto again = compile(g, dir() / "b.neff");
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 2u);
  const std::string warning = "neuron_cc_wrapper: warning: " + entry.string() +
                              ": the cached NEFF does not match its integrity record; compiling it again\n";
  auto at = again.err.find(warning);
  ASSERT_NE(at, std::string::npos) << again.err;
  EXPECT_EQ(again.err.find(warning, at + 1), std::string::npos) << "said twice:\n" << again.err;
  EXPECT_EQ(read_text(dir() / "b.neff"), read_text(entry / "model.neff"));
}

TEST_F(Wrapper, HelpAfterACommandPrintsTheUsage) {
  auto top = run_tool("neuron_cc_wrapper", {"--help"});
  ASSERT_EQ(top.exit_code, 0) << top.describe();
  ASSERT_TRUE(top.out.starts_with("usage:\n")) << top.out;
  for (const char* command : {"compile", "compile-entry", "key"}) {
    auto r = run_tool("neuron_cc_wrapper", {command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.describe();
    EXPECT_EQ(r.out, top.out) << command;
    EXPECT_EQ(r.err, "") << command;
  }
  EXPECT_EQ(compiles(), 0u);
  EXPECT_TRUE(entries().empty());
}

TEST_F(Wrapper, CachedFailureIsNotRecompiledUnlessAsked) {
  fs::path g = graph("bad.hlo", "HloModule bad\n");
  std::map<std::string, std::string> failing = {{"STANDIN_CC_FAULT", "fail"}};
  auto first = compile(g, dir() / "a.neff", {}, failing);
  EXPECT_EQ(first.exit_code, 1) << first.describe();
  EXPECT_EQ(compiles(), 1u);
  ASSERT_EQ(entries().size(), 1u);
  fs::path entry = entries()[0];
  EXPECT_TRUE(fs::exists(entry / "model.log"));
  EXPECT_FALSE(fs::exists(entry / "model.done"));
  EXPECT_FALSE(fs::exists(dir() / "a.neff"));
  EXPECT_NE(first.err.find("failed: compiler exit code 1; full log: " + (entry / "model.log").string()), std::string::npos)
      << first.err;
  EXPECT_NE(first.err.find("  | "), std::string::npos) << "the log's last lines are shown";

  auto second = compile(g, dir() / "a.neff");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(second.out, "Got a cached failed neff at " + (entry / "model.log").string() +
                            ". Will skip compilation, please set --retry_failed_compilation\n");
  EXPECT_EQ(second.err, "neuron_cc_wrapper: error: this graph failed to compile earlier and the failure is cached (" +
                            (entry / "model.log").string() +
                            "); to compile it again, add --retry_failed_compilation to NEURON_CC_FLAGS or run "
                            "neuron_cache clear-failed\n");

  auto retried = compile(g, dir() / "a.neff", {"--retry_failed_compilation"});
  ASSERT_EQ(retried.exit_code, 0) << retried.describe();
  EXPECT_EQ(compiles(), 2u);
  EXPECT_TRUE(fs::exists(entry / "model.done"));
  EXPECT_FALSE(fs::exists(entry / "model.log"));
  auto meta = cache::read_entry_meta(entry);
  ASSERT_EQ(meta->attempts.size(), 2u);
  EXPECT_EQ(meta->attempts[0].outcome, "failed");
  EXPECT_EQ(meta->attempts[1].outcome, "success");
  EXPECT_EQ(meta->attempts[1].attempt, 2);
}

TEST_F(Wrapper, RetryFromNeuronCcFlags) {
  fs::path g = graph("bad.hlo", "HloModule bad\n");
  ASSERT_EQ(compile(g, dir() / "a.neff", {}, {{"STANDIN_CC_FAULT", "fail"}}).exit_code, 1);
  env_["NEURON_CC_FLAGS"] += " --retry_failed_compilation";
  auto r = compile(g, dir() / "a.neff");
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 2u);
}

TEST_F(Wrapper, NoCacheCompilesStraightToOutput) {
  fs::path g = graph("a.hlo", "HloModule nocache\n");
  env_["NEURON_CC_FLAGS"] = "--cache_dir=" + (dir() / "c").string() + " --no_cache -O3";
  auto r = compile(g, dir() / "out.neff");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_FALSE(fs::exists(dir() / "c"));
  EXPECT_EQ(neff_line(dir() / "out.neff", "flags"), "-O3 --target=" + machine_target());
  // No temp work dir left beside the output.
  for (const auto& e : fs::directory_iterator(dir())) EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-"));
  auto again = compile(g, dir() / "out.neff");
  EXPECT_EQ(compiles(), 2u);

  auto failing = compile(g, dir() / "bad.neff", {}, {{"STANDIN_CC_FAULT", "exit70"}});
  EXPECT_EQ(failing.exit_code, 1) << failing.describe();
  EXPECT_FALSE(fs::exists(dir() / "bad.neff"));
  EXPECT_TRUE(fs::exists(dir() / "bad.neff.log"));
  EXPECT_NE(failing.err.find("exit code 70"), std::string::npos) << failing.err;
}

TEST_F(Wrapper, EightProcessesAskingForTheSameFourGraphsCompileEachOnce) {
  constexpr int kProcesses = 8, kGraphs = 4;
  std::vector<fs::path> graphs;
  for (int i = 0; i < kGraphs; ++i) graphs.push_back(graph("g" + std::to_string(i), "HloModule same" + std::to_string(i) + "\n"));
  env_["STANDIN_CC_BASE_MS"] = "300"; // long enough for everyone to collide
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int failures = 0;
      for (int k = 0; k < kGraphs; ++k) {
        int i = (k + p) % kGraphs;
        fs::path out = dir() / ("out" + std::to_string(p) + "_" + std::to_string(i));
        auto r = compile(graphs[static_cast<size_t>(i)], out);
        if (r.exit_code != 0 || neff_line(out, "graph-sha256") != util::sha256_hex(read_text(graphs[static_cast<size_t>(i)])))
          ++failures;
      }
      ::_exit(failures);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a process failed or got a wrong NEFF";
  }
  EXPECT_EQ(compiles(), static_cast<size_t>(kGraphs));
  EXPECT_EQ(entries().size(), static_cast<size_t>(kGraphs));
}

TEST_F(Wrapper, SixteenProcessesRacingForOneEntryPublishOneResult) {
  constexpr int kProcesses = 16;
  fs::path g = graph("race.hlo", "HloModule race\n" + std::string(200000, '#') + "\n");
  env_["STANDIN_CC_BASE_MS"] = "200";
  std::string expected_sha = util::sha256_hex(read_text(g));
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      fs::path out = dir() / ("out" + std::to_string(p));
      auto r = compile(g, out);
      ::_exit(r.exit_code == 0 && neff_line(out, "graph-sha256") == expected_sha ? 0 : 1);
    }
    children.push_back(pid);
  }
  // Meanwhile a reader keeps looking, for as long as a racer runs: whenever
  // model.done exists, the NEFF beside it is whole (its size never changes
  // afterwards).
  std::uintmax_t seen_size = 0;
  int torn = 0, looks_at_done = 0;
  std::vector<pid_t> running = children;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto look = [&] {
    for (const auto& e : entries()) {
      if (!fs::exists(e / "model.done")) continue;
      std::error_code ec;
      auto size = fs::file_size(e / "model.neff", ec);
      if (ec) continue;
      ++looks_at_done;
      if (seen_size == 0) seen_size = size;
      if (size != seen_size) ++torn;
    }
  };
  while (!running.empty() && std::chrono::steady_clock::now() < deadline) {
    look();
    std::erase_if(running, [](pid_t pid) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) != pid) return false;
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "racer " << pid << " failed or got a wrong NEFF";
      return true;
    });
    ::usleep(2000);
  }
  EXPECT_TRUE(running.empty()) << running.size() << " racers still running after 60 s";
  for (pid_t pid : running) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  look(); // and once more after the last racer, so the entry is seen done at least once
  EXPECT_EQ(torn, 0);
  EXPECT_GT(looks_at_done, 0) << "the reader never saw a published entry: nothing was checked for tearing";
  EXPECT_EQ(compiles(), 1u);
  ASSERT_EQ(entries().size(), 1u);
  for (int p = 0; p < kProcesses; ++p)
    EXPECT_EQ(read_text(dir() / ("out" + std::to_string(p))), read_text(entries()[0] / "model.neff"));
}

TEST_F(Wrapper, ALockHolderKilledWithSigkillDoesNotBlockTheNext) {
  fs::path g = graph("held.hlo", "HloModule held\n");
  pid_t holder = start_tool("neuron_cc_wrapper", {"compile", "--graph", g.string(), "--output", (dir() / "a").string()},
                            {{"STANDIN_CC_FAULT", "hang"}}, dir() / "holder.log");
  ASSERT_TRUE(wait_until([&] { return compiles() > 0; }, std::chrono::seconds(5)));
  ASSERT_EQ(compiles(), 1u) << read_text(dir() / "holder.log");
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  auto killed = util::wait_child(holder);
  ASSERT_TRUE(killed.signaled && killed.signal == SIGKILL)
      << "the lock holder ended before the kill landed (" << killed.describe() << "): nothing was killed";
  auto start = std::chrono::steady_clock::now();
  auto next = compile(g, dir() / "b");
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  // flock dies with its holder: the next caller waits for nobody.
  EXPECT_LT(waited, std::chrono::seconds(2));
  EXPECT_EQ(compiles(), 2u);
  // The killed compile's work folder is gone with the next compile of the entry.
  ASSERT_EQ(entries().size(), 1u);
  for (const auto& f : fs::directory_iterator(entries()[0]))
    EXPECT_FALSE(f.path().filename().string().starts_with(".tmp-")) << f.path();
  // The hung compiler of the killed wrapper (it dies with the wrapper; if it
  // ever did not, end it here rather than leave it hanging).
  for (const auto& p : processes_with_cmdline(cache_root().string())) ::kill(p.pid, SIGKILL);
}

TEST_F(Wrapper, CompileEntryCompilesAPendingEntryInPlace) {
  fs::path g = graph("a.hlo", "HloModule pending\n");
  ASSERT_EQ(compile(g, dir() / "a.neff", {"-O1"}, {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}).exit_code, 0);
  fs::path entry = entries()[0];
  auto r = run_tool("neuron_cc_wrapper", {"compile-entry", entry.string()},
                    {{"NEURON_PLATFORM_TARGET_OVERRIDE", "inf2"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_TRUE(fs::exists(entry / "model.done"));
  EXPECT_EQ(neff_line(entry / "model.neff", "flags"), "-O1 --target=inf2");
  EXPECT_EQ(r.err, ""); // the override decided: nothing to warn about
  auto again = run_tool("neuron_cc_wrapper", {"compile-entry", entry.string()});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, "Already compiled: " + entry.string() + "\n");
  EXPECT_EQ(compiles(), 1u);
}

// The tasks of a Slurm step are one run: a graph one task failed for good
// (its last attempt) is not compiled again by another, even with
// --retry_failed_compilation; a timeout likewise, though it caches nothing.
// Another run, or the same task's retry (no --last-attempt), compiles it.
TEST_F(Wrapper, CompileEntryOfARunDoesNotCompileAGraphTheRunFailedForGood) {
  for (const char* fault : {"fail", "hang"}) {
    SCOPED_TRACE(fault);
    std::error_code ec;
    fs::remove_all(cache_root(), ec);
    fs::remove(invocation_log(), ec);
    fs::path g = graph("a.hlo", std::string("HloModule run_") + fault + "\n");
    ASSERT_EQ(compile(g, dir() / "a.neff", {}, {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}).exit_code, 0);
    fs::path entry = entries()[0];
    const std::map<std::string, std::string> faulty = {{"STANDIN_CC_FAULT", fault}};
    auto compile_entry = [&](std::vector<std::string> extra) {
      std::vector<std::string> args = {"compile-entry", entry.string(), "--timeout=0.5"};
      args.insert(args.end(), extra.begin(), extra.end());
      return run_tool("neuron_cc_wrapper", args, faulty);
    };
    auto first = compile_entry({"--run", "slurm step 9.0", "--run-by", "task 0/2 a"});
    EXPECT_EQ(first.exit_code, 1) << first.describe();
    EXPECT_EQ(compiles(), 1u);
    // Not its last attempt: a retry follows, so the run may compile it.
    auto retry = compile_entry({"--run", "slurm step 9.0", "--run-by", "task 0/2 a", "--last-attempt",
                                "--retry_failed_compilation"});
    EXPECT_EQ(retry.exit_code, 1) << retry.describe();
    EXPECT_EQ(compiles(), 2u);
    auto meta = cache::read_entry_meta(entry);
    ASSERT_TRUE(meta.ok()) << meta.error();
    ASSERT_EQ(meta->attempts.size(), 2u);
    EXPECT_EQ(meta->attempts[1].run, "slurm step 9.0");
    EXPECT_EQ(meta->attempts[1].by, "task 0/2 a");
    EXPECT_TRUE(meta->attempts[1].last);
    EXPECT_EQ(meta->attempts[1].outcome, std::string(fault) == "hang" ? "timeout" : "failed");
    // Another task of the same run: failed, not compiled.
    auto other = compile_entry({"--run", "slurm step 9.0", "--run-by", "task 1/2 b", "--retry_failed_compilation",
                                "--result-file", (dir() / "result.json").string()});
    EXPECT_EQ(other.exit_code, 1) << other.describe();
    EXPECT_EQ(compiles(), 2u) << "compiled again in the run that failed it";
    const std::string how = std::string(fault) == "hang" ? "timed out after 0.5s" : "compiler exit code 1";
    const fs::path log = entry / (std::string(fault) == "hang" ? "npc-killed.log" : "model.log");
    EXPECT_EQ(other.err, "Failed earlier in this run, not compiled again: " + entry.string() + " (" + how +
                             " in task 0/2 a (slurm step 9.0)); log " + log.string() + "\n");
    auto report = nlohmann::json::parse(read_text(dir() / "result.json"));
    EXPECT_EQ(report["outcome"], "failed_in_run");
    EXPECT_EQ(report["exit"], how + " in task 0/2 a (slurm step 9.0)");
    // Another run (the next step, a requeued job) tries again.
    auto next = compile_entry({"--run", "slurm step 10.0", "--run-by", "task 1/2 b", "--retry_failed_compilation"});
    EXPECT_EQ(next.exit_code, 1) << next.describe();
    EXPECT_EQ(compiles(), 3u);
  }
}

TEST_F(Wrapper, CompileEntryNoWaitReportsALockedEntry) {
  fs::path g = graph("a.hlo", "HloModule locked\n");
  ASSERT_EQ(compile(g, dir() / "a.neff", {}, {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}).exit_code, 0);
  fs::path entry = entries()[0];
  // Held by this process: a live owner of this host.
  write_text(entry / "model.hlo_module.pb.lock",
             storage::LockRecord{util::LockHolder::self("test").serialize(), "token", 0}.serialize());
  auto r = run_tool("neuron_cc_wrapper", {"compile-entry", entry.string(), "--no-wait"});
  EXPECT_EQ(r.exit_code, 75) << r.describe();
  EXPECT_EQ(compiles(), 0u);
  auto waited = run_tool("neuron_cc_wrapper", {"compile-entry", entry.string(), "--lock-timeout=0.3"});
  EXPECT_EQ(waited.exit_code, 3) << waited.describe();
  EXPECT_NE(waited.err.find("held by pid " + std::to_string(::getpid())), std::string::npos) << waited.err;
}

TEST_F(Wrapper, KeyPrintsTheEntryAndWhatWentIntoIt) {
  fs::path g = graph("a.hlo", "HloModule key\n");
  auto r = run_tool("neuron_cc_wrapper", {"key", "--graph", g.string(), "-O2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::string sha = util::sha256_hex(read_text(g));
  // printf '%s' '-O2' | md5sum -> b5fb2f64a2668606ede8f74eb708e30b;
  // printf '3:-O2;' | sha256sum -> 69043d16... (the legacy flags part)
  fs::path version = cache_root() / version_dir();
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), (version / ("MODULE_" + sha.substr(0, 20) + "+b5fb2f64")).string());
  EXPECT_NE(r.out.find("\nflags text (joined by single spaces): [-O2]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nflags md5: b5fb2f64a2668606ede8f74eb708e30b  -> flags hash b5fb2f64"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nlegacy flags encoding: 3:-O2;\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(sha), std::string::npos);
  EXPECT_TRUE(r.out.ends_with("\nlegacy entry path: " + (version / ("MODULE_" + sha.substr(0, 20) + "+69043d16")).string() +
                              "\n"))
      << r.out;
  auto refused = run_tool("neuron_cc_wrapper", {"key", "--graph", g.string(), "--cache-key", "MODULE_1+2"});
  EXPECT_EQ(refused.exit_code, 2) << refused.describe();
  EXPECT_EQ(refused.err, "neuron_cc_wrapper: error: key computes the key of a graph; --cache-key 'MODULE_1+2' names "
                         "one already: drop it\n");
}

// An entry an earlier release compiled under the legacy flags part.
class LegacyEntry : public Wrapper {
protected:
  // Compiles `g` with `flags` and moves the entry to its legacy name, as an
  // earlier release would have left it.
  fs::path make_legacy_entry(const fs::path& g, const std::vector<std::string>& flags) {
    auto r = compile(g, dir() / "first.neff", flags);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(entries().size(), 1u);
    std::string sha = util::sha256_hex(read_text(g));
    fs::path legacy = cache_root() / cache::legacy_key(sha, flags, kStandinVersion).relative_path();
    fs::rename(entries()[0], legacy);
    return legacy;
  }
};

TEST_F(LegacyEntry, ADoneLegacyEntryIsServed) {
  fs::path g = graph("old.hlo", "HloModule old\n");
  fs::path legacy = make_legacy_entry(g, {"-O2"});
  // printf '3:-O2;' | sha256sum -> 69043d16...
  EXPECT_EQ(legacy.filename().string(), "MODULE_" + util::sha256_hex(read_text(g)).substr(0, 20) + "+69043d16");
  auto mtime_before = fs::last_write_time(legacy);
  ::usleep(20000);

  auto hit = compile(g, dir() / "again.neff", {"-O2"});
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u); // nothing compiled again
  EXPECT_EQ(hit.out, "Using a cached neff at " + (legacy / "model.neff").string() +
                         ". Exiting with a successfully compiled graph.\n");
  EXPECT_EQ(read_text(dir() / "again.neff"), read_text(legacy / "model.neff"));
  EXPECT_GT(fs::last_write_time(legacy), mtime_before); // touched as a hit
  ASSERT_EQ(entries(), std::vector<fs::path>{legacy});  // nothing stored under the new key

  // The trial names the done legacy entry instead of storing a pending one.
  fs::path path_log = dir() / "paths.log";
  auto extract = compile(g, dir() / "x.neff", {"-O2"},
                         {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log.string()}});
  ASSERT_EQ(extract.exit_code, 0) << extract.describe();
  EXPECT_EQ(extract.out, "Extracting graphs (" + (legacy / "model.hlo_module.pb").string() +
                             ") for ahead-of-time parallel compilation. No compilation was done.\n");
  EXPECT_EQ(read_text(path_log), (legacy / "model.hlo_module.pb").string() + "\n");
  EXPECT_EQ(entries(), std::vector<fs::path>{legacy});
}

TEST_F(LegacyEntry, ALegacyEntryThatIsNotDoneIsIgnoredAndTheNewKeyIsUsed) {
  fs::path g = graph("old.hlo", "HloModule pending old\n");
  fs::path legacy = make_legacy_entry(g, {"-O1"});
  fs::remove(legacy / "model.done");
  auto r = compile(g, dir() / "b.neff", {"-O1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 2u);
  // printf '%s' '-O1' | md5sum -> c04049861de9e16c13b1aa53c972ae58
  fs::path fresh = cache_root() / version_dir() / ("MODULE_" + util::sha256_hex(read_text(g)).substr(0, 20) + "+c0404986");
  EXPECT_EQ(entries(), (std::vector<fs::path>{legacy, fresh}));
  EXPECT_TRUE(fs::exists(fresh / "model.done"));
  EXPECT_FALSE(fs::exists(legacy / "model.done"));
}

TEST_F(LegacyEntry, ANewEntryIsServedBeforeTheLegacyOne) {
  fs::path g = graph("both.hlo", "HloModule both\n");
  fs::path legacy = make_legacy_entry(g, {});
  ASSERT_EQ(compile(g, dir() / "c.neff").exit_code, 0); // served from legacy
  EXPECT_EQ(compiles(), 1u);
  // A new entry done too (e.g. compiled by torch-neuronx itself): it wins.
  fs::path fresh = cache_root() / version_dir() / ("MODULE_" + util::sha256_hex(read_text(g)).substr(0, 20) + "+d41d8cd9");
  fs::create_directories(fresh);
  for (const char* f : {"model.hlo_module.pb", "compile_flags.json", "model.neff", "model.done", "npc-entry.json"})
    fs::copy_file(legacy / f, fresh / f);
  auto r = compile(g, dir() / "d.neff");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "Using a cached neff at " + (fresh / "model.neff").string() +
                       ". Exiting with a successfully compiled graph.\n");
}

TEST_F(Wrapper, CacheKeyOfTheCallerNamesTheEntry) {
  fs::path g = graph("nxd.hlo", "HloModule nxd\n");
  const std::string module = "MODULE_9993940051196728623+3cc9a3cb";
  fs::path entry = cache_root() / version_dir() / module;
  auto first = compile(g, dir() / "a.neff", {"--cache-key", module, "-O1"});
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(entries(), std::vector<fs::path>{entry});
  EXPECT_EQ(read_text(entry / "compile_flags.json"), "[\"-O1\"]\n"); // --cache-key is not a compiler flag
  EXPECT_EQ(neff_line(entry / "model.neff", "flags"), "-O1 --target=" + machine_target());
  EXPECT_EQ(read_text(dir() / "a.neff"), read_text(entry / "model.neff"));

  // The caller's key decides, not the graph: a hit without hashing it.
  auto hit = compile(graph("other.hlo", "HloModule other\n"), dir() / "b.neff", {"--cache-key=" + module, "-O1"});
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(hit.out, "Using a cached neff at " + (entry / "model.neff").string() +
                         ". Exiting with a successfully compiled graph.\n");

  // Extraction stores under the caller's key too (hex graph part).
  const std::string hex_module = "MODULE_56f0d314fda2b6e1e336+617f6939";
  auto extract = compile(g, dir() / "c.neff", {"--cache-key", hex_module}, {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}});
  ASSERT_EQ(extract.exit_code, 0) << extract.describe();
  fs::path hex_entry = cache_root() / version_dir() / hex_module;
  EXPECT_EQ(extract.out, "Extracting graphs (" + (hex_entry / "model.hlo_module.pb").string() +
                             ") for ahead-of-time parallel compilation. No compilation was done.\n");
  EXPECT_EQ(read_text(hex_entry / "model.hlo_module.pb"), read_text(g));
  EXPECT_EQ(compiles(), 1u);
}

TEST_F(Wrapper, TargetOverrideAndFlagsDecideTheTarget) {
  fs::path g = graph("t.hlo", "HloModule target\n");
  auto overridden = compile(g, dir() / "a.neff", {"-O1"}, {{"NEURON_PLATFORM_TARGET_OVERRIDE", "trn2"}});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.describe();
  EXPECT_EQ(neff_line(dir() / "a.neff", "flags"), "-O1 --target=trn2");
  EXPECT_EQ(neff_line(dir() / "a.neff", "target"), "trn2");
  EXPECT_EQ(overridden.err, "");
  // The target is not part of the key: another target hits the same entry.
  auto hit = compile(g, dir() / "b.neff", {"-O1"}, {{"NEURON_PLATFORM_TARGET_OVERRIDE", "inf2"}});
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u);

  // A target in the flags wins; the variable is not even checked.
  auto flagged = compile(g, dir() / "c.neff", {"--target", "trn1n"}, {{"NEURON_PLATFORM_TARGET_OVERRIDE", "trn3"}});
  ASSERT_EQ(flagged.exit_code, 0) << flagged.describe();
  EXPECT_EQ(neff_line(dir() / "c.neff", "flags"), "--target trn1n");
  EXPECT_EQ(compiles(), 2u);
}

TEST_F(Wrapper, ErrorsAreOneLineWithDocumentedExitCodes) {
  fs::path g = graph("a.hlo", "HloModule e\n");
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    int exit_code;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"compile", "--output", "x"}, {}, 2, "neuron_cc_wrapper: error: --graph FILE is required"},
      {{"compile", "--graph", g.string()}, {}, 2, "neuron_cc_wrapper: error: --output NEFF is required"},
      {{"frobnicate"}, {}, 2, "neuron_cc_wrapper: error: unknown command 'frobnicate'"},
      {{"compile", "--graph", (dir() / "missing.hlo").string(), "--output", "x"}, {}, 2,
       "neuron_cc_wrapper: error: cannot read the graph: cannot open " + (dir() / "missing.hlo").string()},
      {{"compile", "--graph", g.string(), "--output", "x"}, {{"NEURON_CC_FLAGS", "--cache_size=12x"}}, 2,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_size has the bad value '12x'"},
      {{"compile", "--graph", g.string(), "--output", "x"}, {{"NEURON_CC_FLAGS", "'-O2"}}, 2,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: unbalanced single quote at position 1"},
      {{"compile", "--graph", g.string(), "--output", "x"}, {{"NEURON_COMPILE_CACHE_URL", "gs://b/p"}, {"NEURON_CC_FLAGS", ""}}, 2,
       "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_URL: the scheme 'gs://'"},
      {{"compile", "--graph", g.string(), "--output", "x", "--compiler", (dir() / "nope").string()}, {}, 3,
       "neuron_cc_wrapper: error: --compiler " + (dir() / "nope").string() + ": " + (dir() / "nope").string() +
           " is not an executable file"},
      {{"compile", "--graph", g.string(), "--output", "x"}, {{"NEURON_CC", ""}, {"PATH", "/nonexistent"}}, 3,
       "neuron_cc_wrapper: error: the Neuron compiler was not found"},
      {{"compile", "--graph", g.string(), "--output", "x", "--timeout", "-3"}, {}, 2,
       "neuron_cc_wrapper: error: --timeout has the bad value '-3'"},
      {{"compile", "--graph", g.string(), "--output", "x", "--cache-key", "MODULE_AB+cd"}, {}, 2,
       "neuron_cc_wrapper: error: --cache-key has the bad value 'MODULE_AB+cd': expected MODULE_<graph hash>+<flags "
       "hash>, each lower-case hex or decimal digits (e.g. MODULE_9993940051196728623+3cc9a3cb)"},
      {{"compile", "--graph", g.string(), "--output", "x", "--cache-key=../../etc"}, {}, 2,
       "neuron_cc_wrapper: error: --cache-key has the bad value '../../etc': expected MODULE_"},
      {{"compile", "--graph", g.string(), "--output", "x"}, {{"NEURON_PLATFORM_TARGET_OVERRIDE", "trn9"}}, 2,
       "neuron_cc_wrapper: error: NEURON_PLATFORM_TARGET_OVERRIDE has the bad value 'trn9': expected one of trn1, "
       "trn1n, trn2, inf2 (or unset it)"},
  };
  for (const auto& c : cases) {
    auto r = run_tool("neuron_cc_wrapper", c.args, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.describe();
    EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << "expected: " << c.message << "\n" << r.describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  }
  EXPECT_EQ(compiles(), 0u);
}

} // namespace
} // namespace npc::test
