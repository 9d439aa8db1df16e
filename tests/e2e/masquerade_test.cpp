// neuron_cc_wrapper as `neuronx-cc` (cli/as_neuronx_cc.hpp): a frontend that
// runs the compiler from PATH once per graph, each graph in a fresh temporary
// folder as TorchNeuron does, with the masquerade directory first on PATH and
// the stand-in compiler after it.

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

std::size_t count_lines_with(const std::string& text, const std::string& part) {
  std::size_t n = 0, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    n += text.substr(start, end - start).find(part) != std::string::npos;
    start = end + 1;
  }
  return n;
}

class Masquerade : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    // The real compiler as a frontend's users have it: on PATH, after the
    // masquerade directory, and not named by NEURON_CC.
    env_.erase("NEURON_CC");
    env_["PATH"] = masquerade_dir().string() + ":" + standin_dir().string() + ":/usr/bin:/bin";
  }
  // The build tree's, as installed (neuron_cache masquerade-dir prints it).
  static fs::path masquerade_dir() {
    return (bin_dir() / ".." / "libexec" / "neuron-parallel-compile" / "masquerade").lexically_normal();
  }
  // The graph in a fresh folder of its own, as a frontend writes it.
  fs::path write_graph(const std::string& text, const std::string& name = "module.hlo.pb") {
    fs::path folder = dir() / ("tmp" + std::to_string(++folders_));
    fs::create_directories(folder);
    write_text(folder / name, text);
    return folder / name;
  }
  // `neuronx-cc compile GRAPH <flags> --output <its folder>/module.neff`, found on PATH.
  RunResult compile(const fs::path& graph, std::vector<std::string> flags = {},
                    std::map<std::string, std::string> env = {}) {
    return run(compile_words(graph, graph.parent_path() / "module.neff", std::move(flags)), options(std::move(env)));
  }
  // The same with the output `output`.
  RunResult compile_to(const fs::path& graph, const fs::path& output) {
    return run(compile_words(graph, output), options());
  }
  std::vector<std::string> compile_words(const fs::path& graph, const fs::path& output,
                                         std::vector<std::string> flags = {}) const {
    if (flags.empty()) flags = kTorchNeuronFlags;
    std::vector<std::string> argv = {neuronx_cc().string(), "compile", graph.string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--output");
    argv.push_back(output.string());
    return argv;
  }
  // The cache's counters of `program` (neuron_cache stats --json).
  nlohmann::json usage(const std::string& program = "neuronx-cc (masquerade)") {
    auto stats = run_tool("neuron_cache", {"--json", "stats"});
    EXPECT_EQ(stats.exit_code, 0) << stats.describe();
    auto programs = nlohmann::json::parse(stats.out)["usage"]["programs"];
    auto counts = programs.value(program, nlohmann::json::object());
    return {{"hits", counts.value("hits", 0)}, {"misses", counts.value("misses", 0)}};
  }
  // A copy of neuron_cc_wrapper at `path`, as `cp` makes one.
  static void copy_wrapper(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fs::copy_file(program("neuron_cc_wrapper"), path);
  }
  // The masquerade's neuronx-cc, as a frontend finds it first on PATH.
  static fs::path neuronx_cc() { return masquerade_dir() / "neuronx-cc"; }
  static std::string neff_of(const fs::path& graph) { return read_text(graph.parent_path() / "module.neff"); }

  const std::vector<std::string> kTorchNeuronFlags = {"--framework", "XLA", "--target", "trn2", "--lnc", "1", "-O2",
                                                      "--model-type", "transformer", "--auto-cast=none"};
  int folders_ = 0;
};

TEST_F(Masquerade, AMissCompilesAndStoresAndTheSameGraphInAnotherFolderHits) {
  fs::path first = write_graph("HloModule a\n");
  auto miss = compile(first);
  ASSERT_EQ(miss.exit_code, 0) << miss.describe();
  EXPECT_EQ(compiles(), 1u);
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries().front();
  EXPECT_EQ(names_in(entry), (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb",
                                                       "model.neff", "npc-entry.json"}));
  EXPECT_EQ(read_text(entry / "model.hlo_module.pb"), "HloModule a\n");
  // The words as given after `compile`, but for the input and --output.
  EXPECT_EQ(read_text(entry / "compile_flags.json"),
            "[\"--framework\",\"XLA\",\"--target\",\"trn2\",\"--lnc\",\"1\",\"-O2\",\"--model-type\","
            "\"transformer\",\"--auto-cast=none\"]\n");
  EXPECT_EQ(neff_of(first), read_text(entry / "model.neff"));

  fs::path second = write_graph("HloModule a\n");
  auto hit = compile(second);
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u) << "served from the cache";
  EXPECT_EQ(hit.out, "");
  EXPECT_EQ(hit.err, "");
  EXPECT_EQ(neff_of(second), neff_of(first));
}

// A read-only secondary cache (NEURON_COMPILE_CACHE_SECONDARY), filled by
// another machine: a miss here is served from it and copied in, as for the
// wrapper's compile, and the real compiler does not run.
TEST_F(Masquerade, AMissHereIsServedFromTheSecondaryCache) {
  const std::string secondary = (dir() / "secondary").string();
  ASSERT_EQ(compile(write_graph("HloModule a\n"), {}, {{"NEURON_CC_FLAGS", "--cache_dir=" + secondary}}).exit_code, 0);
  ASSERT_EQ(compiles(), 1u);
  ASSERT_TRUE(entries().empty());
  fs::path graph = write_graph("HloModule a\n");
  auto served = compile(graph, {}, {{"NEURON_COMPILE_CACHE_SECONDARY", secondary}});
  ASSERT_EQ(served.exit_code, 0) << served.describe();
  EXPECT_EQ(compiles(), 1u) << "served from the secondary cache";
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_TRUE(fs::exists(entries().front() / "model.done"));
  EXPECT_EQ(neff_of(graph), read_text(entries().front() / "model.neff"));
  EXPECT_EQ(usage()["hits"], 1);
}

TEST_F(Masquerade, OtherFlagsOrAnotherGraphAreOtherEntries) {
  ASSERT_EQ(compile(write_graph("HloModule a\n")).exit_code, 0);
  ASSERT_EQ(compile(write_graph("HloModule b\n")).exit_code, 0);
  std::vector<std::string> o1 = kTorchNeuronFlags;
  o1[6] = "-O1";
  ASSERT_EQ(compile(write_graph("HloModule a\n"), o1).exit_code, 0);
  EXPECT_EQ(compiles(), 3u);
  EXPECT_EQ(entries().size(), 3u);
  ASSERT_EQ(compile(write_graph("HloModule a\n"), o1).exit_code, 0);
  EXPECT_EQ(compiles(), 3u);
}

// An NKI kernel's source named in the graph: its bytes key the compile, so
// an edited kernel is compiled again, never served the old NEFF.
TEST_F(Masquerade, AFileTheGraphNamesKeysTheCompileByItsBytes) {
  const fs::path kernel = dir() / "kernels" / "attention.py";
  write_text(kernel, "def kernel(): return 1\n");
  const std::string graph =
      "HloModule k\nENTRY e { ROOT c = f32[4] custom-call(), custom_call_target=\"AwsNeuronCustomNativeKernel\", "
      "backend_config=\"{\\\"source\\\": \\\"" + kernel.string() + "\\\"}\" }\n";
  ASSERT_EQ(compile(write_graph(graph)).exit_code, 0);
  ASSERT_EQ(compile(write_graph(graph)).exit_code, 0);
  EXPECT_EQ(compiles(), 1u);
  write_text(kernel, "def kernel(): return 2\n");
  ASSERT_EQ(compile(write_graph(graph)).exit_code, 0);
  EXPECT_EQ(compiles(), 2u) << "the edited kernel was served the old NEFF";
  EXPECT_EQ(entries().size(), 2u);
  // A path that names nothing is only bytes of the graph.
  const std::string dangling = "HloModule d\n// source: /nonexistent/dir/kernel.py\n";
  ASSERT_EQ(compile(write_graph(dangling)).exit_code, 0);
  ASSERT_EQ(compile(write_graph(dangling)).exit_code, 0);
  EXPECT_EQ(compiles(), 3u);
}

TEST_F(Masquerade, AFailureIsTheCompilersOwnAndNotCached) {
  fs::path graph = write_graph("HloModule bad\n");
  auto failed = compile(graph, {}, {{"STANDIN_CC_FAULT", "fail"}});
  EXPECT_EQ(failed.exit_code, 1) << failed.describe();
  EXPECT_NE(failed.err.find("neuronx-cc"), std::string::npos) << "the compiler's own message reaches the caller\n"
                                                               << failed.describe();
  EXPECT_FALSE(fs::exists(graph.parent_path() / "module.neff"));
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_FALSE(fs::exists(entries().front() / "model.log")) << "a failure is never cached";
  EXPECT_FALSE(fs::exists(entries().front() / "model.done"));
  auto again = compile(write_graph("HloModule bad\n"));
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 2u);
}

TEST_F(Masquerade, WhatItDoesNotCacheGoesToTheRealCompilerUntouched) {
  auto version = run({neuronx_cc().string(), "--version"}, options());
  EXPECT_EQ(version.exit_code, 0) << version.describe();
  EXPECT_EQ(version.out, std::string("NeuronX Compiler version ") + kStandinVersion + "\n");
  // An option it cannot tell takes a value or not: the real compiler's own
  // answer, its exit status and message.
  fs::path graph = write_graph("HloModule a\n");
  auto unknown = run({neuronx_cc().string(), "compile", graph.string(), "--no-such-option", "--output",
                      (graph.parent_path() / "module.neff").string()},
                     options());
  EXPECT_EQ(unknown.exit_code, 2) << unknown.describe();
  EXPECT_EQ(unknown.err, "neuronx-cc: error: unrecognized arguments: --no-such-option\n");
  EXPECT_EQ(compiles(), 0u);
  EXPECT_FALSE(fs::exists(cache_root()));
}

TEST_F(Masquerade, ACacheItCannotUseCompilesWithoutItAndWarnsOnce) {
  write_text(dir() / "not-a-dir", "x");
  fs::path graph = write_graph("HloModule a\n");
  auto res = compile(graph, {}, {{"NEURON_CC_FLAGS", "--cache_dir=" + (dir() / "not-a-dir").string()}});
  ASSERT_EQ(res.exit_code, 0) << res.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_TRUE(fs::exists(graph.parent_path() / "module.neff"));
  EXPECT_EQ(count_lines_with(res.err, "compiling without it"), 1u) << res.err;
}

TEST_F(Masquerade, WithoutTheRealCompilerOneLineSaysWhatToDo) {
  env_["PATH"] = masquerade_dir().string() + ":/usr/bin:/bin";
  auto res = compile(write_graph("HloModule a\n"));
  EXPECT_EQ(res.exit_code, 3) << res.describe();
  EXPECT_EQ(count_lines_with(res.err, "the real neuronx-cc is needed"), 1u) << res.err;
  EXPECT_NE(res.err.find("NEURON_CC=PATH"), std::string::npos) << res.err;
}

// The entries are the cache's like any other: neuron_cache lists and checks them.
TEST_F(Masquerade, NeuronCacheManagesWhatItStores) {
  ASSERT_EQ(compile(write_graph("HloModule a\n")).exit_code, 0);
  auto verify = run_tool("neuron_cache", {"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.describe();
  auto ls = run_tool("neuron_cache", {"ls"});
  EXPECT_EQ(count_lines_with(ls.out, "done"), 1u) << ls.out;
}

// The launcher's own compiles with the masquerade directory on PATH run the
// real compiler, not the masquerade: each graph cached once.
TEST_F(Masquerade, TheWrapperBesideItRunsTheRealCompiler) {
  fs::path graph = write_graph("HloModule a\n");
  auto res = run_tool("neuron_cc_wrapper", {"compile", "--graph", graph.string(), "--output",
                                            (dir() / "out.neff").string()});
  ASSERT_EQ(res.exit_code, 0) << res.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(entries().size(), 1u);
}

// The stand-in frontend (TorchNeuron's way: each new graph in a fresh
// temporary folder, neuronx-cc from PATH): its second run compiles nothing.
TEST_F(Masquerade, AFrontendsSecondRunCompilesNothing) {
  fs::create_directories(dir() / "tmp");
  const std::vector<std::string> frontend = {(standin_dir() / "standin_torchneuron").string(), "--tmpdir",
                                             (dir() / "tmp").string()};
  // The frontend passes NEURON_CC_FLAGS to the compiler: the cache is named
  // by NEURON_COMPILE_CACHE_URL.
  env_.erase("NEURON_CC_FLAGS");
  env_["NEURON_COMPILE_CACHE_URL"] = cache_root().string();
  auto first = run(frontend, options());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_NE(first.out.find("standin_torchneuron: 4 steps, 4 graphs through neuronx-cc in "), std::string::npos)
      << first.out;
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(entries().size(), 4u);
  auto second = run(frontend, options());
  ASSERT_EQ(second.exit_code, 0) << second.describe();
  EXPECT_EQ(compiles(), 4u) << "every graph of the second run is a hit";
  EXPECT_TRUE(names_in(dir() / "tmp").empty()) << "the frontend's folders are its own to remove";
}

// Eight frontends at once over the same graphs (the ranks of one job, or
// jobs on one host): each graph is compiled once, the others wait for its
// lock and are served the NEFF.
TEST_F(Masquerade, EightFrontendsAtOnceCompileEachGraphOnce) {
  env_.erase("NEURON_CC_FLAGS");
  env_["NEURON_COMPILE_CACHE_URL"] = cache_root().string();
  env_["STANDIN_CC_BASE_MS"] = "200";
  fs::create_directories(dir() / "tmp");
  std::vector<pid_t> frontends;
  const std::vector<std::string> frontend = {(standin_dir() / "standin_torchneuron").string(), "--tmpdir",
                                             (dir() / "tmp").string()};
  for (int i = 0; i < 8; ++i)
    frontends.push_back(start_background(frontend, options(), dir() / ("frontend-" + std::to_string(i) + ".log")));
  for (std::size_t i = 0; i < frontends.size(); ++i) {
    auto status = util::wait_child(frontends[i]);
    EXPECT_TRUE(status.success()) << status.describe() << "\n"
                                  << read_text(dir() / ("frontend-" + std::to_string(i) + ".log"));
  }
  EXPECT_EQ(compiles(), 4u) << "a graph was compiled twice";
  EXPECT_EQ(distinct_graphs_compiled(), 4u);
  EXPECT_EQ(entries().size(), 4u);
  for (const auto& entry : entries()) EXPECT_TRUE(fs::exists(entry / "model.done")) << entry;
  EXPECT_TRUE(names_in(dir() / "tmp").empty());
}

TEST_F(Masquerade, NeuronCachePrintsOrMakesTheDirectory) {
  auto shipped = run_tool("neuron_cache", {"masquerade-dir"});
  ASSERT_EQ(shipped.exit_code, 0) << shipped.describe();
  EXPECT_EQ(shipped.out, masquerade_dir().string() + "\n");
  EXPECT_EQ(fs::read_symlink(masquerade_dir() / "neuronx-cc"), "../../../bin/neuron_cc_wrapper");

  auto made = run_tool("neuron_cache", {"masquerade-dir", "--create", (dir() / "mq").string()});
  ASSERT_EQ(made.exit_code, 0) << made.describe();
  EXPECT_EQ(made.out, (dir() / "mq").string() + "\n");
  EXPECT_TRUE(fs::equivalent(dir() / "mq" / "neuronx-cc", program("neuron_cc_wrapper")));
  auto again = run_tool("neuron_cache", {"masquerade-dir", "--create", (dir() / "mq").string()});
  EXPECT_EQ(again.exit_code, 0) << again.describe();

  write_text(dir() / "taken" / "neuronx-cc", "#!/bin/sh\n");
  auto taken = run_tool("neuron_cache", {"masquerade-dir", "--create", (dir() / "taken").string()});
  EXPECT_EQ(taken.exit_code, 3) << taken.describe();
  EXPECT_EQ(taken.err, "neuron_cache: error: " + (dir() / "taken" / "neuronx-cc").string() + " exists and is not " +
                           program("neuron_cc_wrapper").string() + ": remove it, or choose another directory\n");
}

// The masquerade's answers are counted apart from neuron_cc_wrapper's.
TEST_F(Masquerade, ItsHitsAndMissesAreCountedUnderItsOwnName) {
  ASSERT_EQ(compile(write_graph("HloModule counted\n")).exit_code, 0);
  ASSERT_EQ(compile(write_graph("HloModule counted\n")).exit_code, 0);
  ASSERT_EQ(compile(write_graph("HloModule counted\n")).exit_code, 0);
  auto stats = run_tool("neuron_cache", {"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.describe();
  auto programs = nlohmann::json::parse(stats.out)["usage"]["programs"];
  ASSERT_EQ(programs.size(), 1u) << programs.dump();
  EXPECT_EQ(programs["neuronx-cc (masquerade)"]["misses"], 1);
  EXPECT_EQ(programs["neuronx-cc (masquerade)"]["hits"], 2);
  EXPECT_EQ(programs["neuronx-cc (masquerade)"]["hits_without_time"], 0);
}

// ---- an --output that cannot be written --------------------------------

// Refused as `neuron_cc_wrapper compile` refuses it, before any look in the
// cache: on a miss nothing is compiled or stored, on a hit nothing is served
// or counted, and the real compiler never runs for it.
TEST_F(Masquerade, AnOutputThatCannotBeWrittenIsRefusedBeforeAnyLookOrCompile) {
  write_text(dir() / "a-file", "x");
  const fs::path graph = write_graph("HloModule a\n");
  const std::vector<std::pair<fs::path, std::string>> outputs = {
      {dir() / "missing" / "module.neff", "No such file or directory"},
      {graph.parent_path(), "Is a directory"},
      {dir() / "a-file" / "module.neff", "Not a directory"}};
  auto refused = [&](const RunResult& r, const fs::path& output, const std::string& why) {
    EXPECT_EQ(r.exit_code, 3) << r.describe();
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "neuron_cc_wrapper: error: --output: cannot write " + output.string() + ": " + why +
                         " (name a file in a writable directory)\n");
  };
  for (const auto& [output, why] : outputs) refused(compile_to(graph, output), output, why);
  EXPECT_EQ(compiles(), 0u);
  EXPECT_TRUE(entries().empty()) << "a miss refused before its graph was stored";

  ASSERT_EQ(compile(graph).exit_code, 0);
  ASSERT_EQ(compiles(), 1u);
  for (const auto& [output, why] : outputs) refused(compile_to(graph, output), output, why);
  EXPECT_EQ(compiles(), 1u) << "a hit whose output cannot be written became a compile";
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 1}}));
}

// An output that passes the check but cannot take the NEFF (a full device;
// a folder removed during the compile): the compile that ran is cached and
// counted, and the real compiler does not run a second time for it.
TEST_F(Masquerade, ANeffTheOutputCannotTakeIsCompiledOnceCachedAndCounted) {
  const fs::path full = dir() / "full";
  fs::create_symlink("/dev/full", full);
  const fs::path graph = write_graph("HloModule a\n");
  const std::string error =
      "neuron_cc_wrapper: error: --output: cannot write " + full.string() + ": No space left on device\n";
  auto miss = compile_to(graph, full);
  EXPECT_EQ(miss.exit_code, 3) << miss.describe();
  EXPECT_EQ(miss.err, error);
  EXPECT_EQ(compiles(), 1u) << "the real compiler ran again after the cache's compile";
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_TRUE(fs::exists(entries().front() / "model.done"));
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 1}})) << "the compile that ran is a miss";

  auto hit = compile_to(graph, full);
  EXPECT_EQ(hit.exit_code, 3) << hit.describe();
  EXPECT_EQ(hit.err, error);
  EXPECT_EQ(compiles(), 1u) << "a hit whose output cannot be written became a compile";
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 1}})) << "nothing was served";

  ASSERT_EQ(compile(graph).exit_code, 0);
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 1}, {"misses", 1}}));
}

// A folder on a read-only mount, as a frontend's output may be: the
// masquerade runs in a mount namespace of its own with a read-only tmpfs
// over the folder (root, or unprivileged user namespaces, needed: the test
// fails, saying so, where neither is).
TEST_F(Masquerade, AnOutputOnAReadOnlyMountIsRefusedOnAMissAndOnAHit) {
  const fs::path read_only = dir() / "ro";
  fs::create_directories(read_only);
  auto in_read_only_mount = [&](const std::vector<std::string>& words) {
    std::vector<std::string> argv = {"unshare", "--mount", "--map-root-user", "--", "/bin/sh", "-c",
                                     "mount -t tmpfs -o ro,size=64k tmpfs \"$0\" && exec \"$@\"",
                                     read_only.string()};
    argv.insert(argv.end(), words.begin(), words.end());
    return run(argv, options());
  };
  if (auto probe = in_read_only_mount({"/bin/true"}); probe.exit_code != 0)
    FAIL() << "this test needs a mount namespace (root, or unprivileged user namespaces): " << probe.describe();
  const fs::path graph = write_graph("HloModule a\n");
  const fs::path output = read_only / "module.neff";
  const std::string error = "neuron_cc_wrapper: error: --output: cannot write " + output.string() +
                            ": Read-only file system (name a file in a writable directory)\n";
  auto miss = in_read_only_mount(compile_words(graph, output));
  EXPECT_EQ(miss.exit_code, 3) << miss.describe();
  EXPECT_EQ(miss.err, error);
  EXPECT_EQ(compiles(), 0u);
  ASSERT_EQ(compile(graph).exit_code, 0);
  auto hit = in_read_only_mount(compile_words(graph, output));
  EXPECT_EQ(hit.exit_code, 3) << hit.describe();
  EXPECT_EQ(hit.err, error);
  EXPECT_EQ(compiles(), 1u);
}

// ---- builds of ours are never the real compiler ---------------------------

// Copies of the wrapper (not links) first and second on PATH, and a hard
// link of one: each is passed over, so the masquerade finds the real
// compiler rather than running itself.
TEST_F(Masquerade, CopiesAndHardLinksOfTheWrapperOnPathArePassedOver) {
  copy_wrapper(dir() / "m1" / "neuronx-cc");
  copy_wrapper(dir() / "m2" / "neuronx-cc");
  fs::create_directories(dir() / "m3");
  fs::create_hard_link(dir() / "m1" / "neuronx-cc", dir() / "m3" / "neuronx-cc");
  env_["PATH"] = (dir() / "m1").string() + ":" + (dir() / "m2").string() + ":" + (dir() / "m3").string() + ":" +
                 standin_dir().string() + ":/usr/bin:/bin";
  const fs::path graph = write_graph("HloModule a\n");
  auto words = compile_words(graph, graph.parent_path() / "module.neff");
  words.front() = (dir() / "m1" / "neuronx-cc").string();
  auto miss = run(words, options());
  ASSERT_EQ(miss.exit_code, 0) << miss.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(entries().size(), 1u);
  auto hit = run(words, options());
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(usage(), (nlohmann::json{{"hits", 1}, {"misses", 1}}));

  // Nothing but copies on PATH: one line that says what to do.
  env_["PATH"] = (dir() / "m1").string() + ":" + (dir() / "m2").string() + ":/usr/bin:/bin";
  auto alone = run(words, options());
  EXPECT_EQ(alone.exit_code, 3) << alone.describe();
  EXPECT_EQ(alone.err, "neuron_cc_wrapper: error: the real neuronx-cc is needed: neuronx-cc was not found on PATH (" +
                           env_["PATH"] + ") but for programs of ours, not the Neuron compiler: " +
                           (dir() / "m1" / "neuronx-cc").string() + " (neuron-parallel-compile " NPC_VERSION "), " +
                           (dir() / "m2" / "neuronx-cc").string() + " (neuron-parallel-compile " NPC_VERSION
                           "); install neuronx-cc on PATH after the masquerade directory, or name it with "
                           "NEURON_CC=PATH\n");
  EXPECT_EQ(compiles(), 1u);
}

// NEURON_CC naming a renamed copy of the wrapper, by its path: said in words,
// never run as the compiler.
TEST_F(Masquerade, NeuronCcNamingARenamedCopyOfOursIsRefusedInWords) {
  const fs::path renamed = dir() / "bin" / "my-neuronx-cc";
  copy_wrapper(renamed);
  const fs::path graph = write_graph("HloModule a\n");
  auto res = compile(graph, {}, {{"NEURON_CC", renamed.string()}});
  EXPECT_EQ(res.exit_code, 3) << res.describe();
  EXPECT_EQ(res.err, "neuron_cc_wrapper: error: NEURON_CC=" + renamed.string() + ": " + renamed.string() +
                         " is a program of neuron-parallel-compile " NPC_VERSION
                         ", not the Neuron compiler; set NEURON_CC to the real neuronx-cc\n");
  EXPECT_EQ(compiles(), 0u);
  auto wrapper = run_tool("neuron_cc_wrapper", {"compile", "--graph", graph.string(), "--output",
                                                (dir() / "out.neff").string()},
                          {{"NEURON_CC", renamed.string()}});
  EXPECT_EQ(wrapper.exit_code, 3) << wrapper.describe();
  EXPECT_EQ(wrapper.err, "neuron_cc_wrapper: error: NEURON_CC=" + renamed.string() + ": " + renamed.string() +
                             " is a program of neuron-parallel-compile " NPC_VERSION
                             ", not the Neuron compiler; set NEURON_CC to the real neuronx-cc, or unset it to use "
                             "neuronx-cc on PATH\n");
  EXPECT_EQ(compiles(), 0u);
}

// The launcher over the stand-in training script (4 graphs), with the
// masquerade or a copy of the wrapper first on PATH.
class MasqueradeLauncher : public Masquerade {
protected:
  RunResult precompile() {
    return run_tool("neuron_parallel_compile",
                    {"--parallel_compile_workdir=" + (dir() / "wd").string(), (standin_dir() / "standin_train").string(),
                     "--steps_this_run", "10", "--graphs_per_step", "2", "--eval_every", "5", "--layers", "2",
                     "--hidden", "64", "--workdir", (dir() / "train").string()},
                    {{"NEURON_CC_WRAPPER", program("neuron_cc_wrapper").string()}});
  }
  // Each graph compiled once, cached once, counted once.
  void expect_each_graph_compiled_once(const RunResult& run) {
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(compiles(), 4u);
    EXPECT_EQ(entries().size(), 4u) << "a graph cached twice";
    EXPECT_EQ(usage("neuron_parallel_compile"), (nlohmann::json{{"hits", 0}, {"misses", 4}}));
    EXPECT_EQ(usage(), (nlohmann::json{{"hits", 0}, {"misses", 0}})) << "a compile went through the masquerade";
    EXPECT_EQ(run.err.find("other compiler flags"), std::string::npos) << run.err;
  }
};

TEST_F(MasqueradeLauncher, ACopyOfTheWrapperFirstOnPathIsNotTheCompiler) {
  copy_wrapper(dir() / "m" / "neuronx-cc");
  env_["PATH"] = (dir() / "m").string() + ":" + standin_dir().string() + ":/usr/bin:/bin";
  expect_each_graph_compiled_once(precompile());
}

// NEURON_CC=neuronx-cc names what the default names: the real compiler past
// the masquerade; with none past it, one line says so.
TEST_F(MasqueradeLauncher, NeuronCcNamingNeuronxCcResolvesPastTheMasquerade) {
  env_["NEURON_CC"] = "neuronx-cc";
  expect_each_graph_compiled_once(precompile());

  env_["PATH"] = masquerade_dir().string() + ":/usr/bin:/bin";
  auto alone = precompile();
  EXPECT_EQ(alone.exit_code, 3) << alone.describe();
  EXPECT_EQ(alone.err, "neuron_parallel_compile: error: NEURON_CC=neuronx-cc: neuronx-cc was not found on PATH (" +
                           env_["PATH"] + ") but for programs of ours, not the Neuron compiler: " +
                           (masquerade_dir() / "neuronx-cc").string() + " (neuron-parallel-compile " NPC_VERSION
                           "); set NEURON_CC to the real neuronx-cc, or unset it to use neuronx-cc on PATH\n");
}

// neuron_cache explain on an entry the masquerade made compares it with the
// command line that keys it, never with NEURON_CC_FLAGS (which do not reach
// it): the same command line hits, and does; another command line given
// after -- is told the words that differ and the key it would use, which
// is the key the masquerade then uses.
TEST_F(Masquerade, ExplainComparesItsEntriesWithTheCompilerCommandLine) {
  const std::string text = "HloModule explained\n";
  ASSERT_EQ(compile(write_graph(text)).exit_code, 0);
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries().front();
  const std::string key = cache::make_key_for_graph(text, kTorchNeuronFlags, kStandinVersion).str();
  ASSERT_EQ(entry, cache_root() / key);
  auto record = cache::read_entry_meta(entry);
  ASSERT_TRUE(record.ok()) << record.error();
  EXPECT_EQ(record->flags_origin(), cache::FlagsOrigin::compiler_command_line);
  EXPECT_NE(read_text(entry / "npc-entry.json").find("\"flags_from\": \"neuronx-cc command line\""), std::string::npos)
      << read_text(entry / "npc-entry.json");
  // NEURON_CC_FLAGS as a torch-neuronx user has them: they key nothing here.
  const std::map<std::string, std::string> o1_flags = {
      {"NEURON_CC_FLAGS", "--cache_dir=" + cache_root().string() + " -O1"}};
  const std::string made = "  " + key + ": done; made by neuronx-cc through the masquerade, keyed by its command "
                           "line (not NEURON_CC_FLAGS)";
  const std::string same_again = "the same neuronx-cc command line as entry " + key + "'s, through the masquerade, "
                                 "will hit: it is done (to compare another command line, give it after --: "
                                 "neuron_cache explain TARGET -- neuronx-cc compile GRAPH FLAGS... --output FILE)";
  auto x = run_tool("neuron_cache", {"explain", entry.string()}, o1_flags);
  ASSERT_EQ(x.exit_code, 0) << x.describe();
  EXPECT_EQ(x.err, "");
  EXPECT_TRUE(has_line(x.out, made + ": flags --framework XLA --target trn2 --lnc 1 -O2 --model-type transformer "
                                     "--auto-cast=none; same compiler version"))
      << x.out;
  EXPECT_EQ(x.out.find("flags removed"), std::string::npos) << x.out;
  EXPECT_TRUE(has_line(x.out, same_again)) << x.out;
  ASSERT_EQ(compile(write_graph(text)).exit_code, 0);
  EXPECT_EQ(compiles(), 1u) << "the same command line hits, as explain said";

  std::vector<std::string> o1 = kTorchNeuronFlags;
  o1[6] = "-O1";
  const std::string o1_key = cache::make_key_for_graph(text, o1, kStandinVersion).str();
  std::vector<std::string> args = {"explain", entry.string(), "--", "neuronx-cc", "compile", "/tmp/g/module.hlo.pb"};
  args.insert(args.end(), o1.begin(), o1.end());
  args.insert(args.end(), {"--output", "/tmp/g/module.neff"});
  auto other = run_tool("neuron_cache", args, o1_flags);
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_TRUE(has_line(other.out, "given neuronx-cc command line: flags --framework XLA --target trn2 --lnc 1 -O1 "
                                  "--model-type transformer --auto-cast=none"))
      << other.out;
  EXPECT_TRUE(has_line(other.out, made + "; against the given command line: flags added: -O1; flags removed: -O2; "
                                         "same compiler version"))
      << other.out;
  EXPECT_TRUE(has_line(other.out, "the given neuronx-cc command line, through the masquerade (key " + o1_key +
                                      "), will miss: no entry the masquerade made has this graph with these flags "
                                      "and this version"))
      << other.out;
  ASSERT_EQ(compile(write_graph(text), o1).exit_code, 0);
  EXPECT_EQ(compiles(), 2u);
  EXPECT_TRUE(fs::exists(cache_root() / o1_key / "model.done")) << "the key explain gave is the masquerade's";
  auto now = run_tool("neuron_cache", args, o1_flags);
  EXPECT_TRUE(has_line(now.out, "the given neuronx-cc command line, through the masquerade (key " + o1_key +
                                    "), will hit: entry " + o1_key + " is done"))
      << now.out;

  args.insert(args.begin(), "--json");
  auto doc = nlohmann::json::parse(run_tool("neuron_cache", args, o1_flags).out);
  ASSERT_EQ(doc["matches"].size(), 2u) << doc.dump();
  for (const auto& m : doc["matches"]) EXPECT_EQ(m["flags_from"], "neuronx-cc command line") << m.dump();
  EXPECT_EQ(doc["command_line"]["outcome"], "hit");
  EXPECT_EQ(doc["command_line"]["entry"], o1_key);
  EXPECT_EQ(doc["command_line"]["key"], o1_key);
  EXPECT_EQ(doc["command_line"]["flags"], nlohmann::json(o1));
}

// A file the graph names changed since the entry was compiled: explain says
// so, and that the same command line will compile again (as it does).
TEST_F(Masquerade, ExplainSaysWhenTheFilesAGraphNamesChanged) {
  const fs::path kernel = dir() / "kernels" / "attention.py";
  write_text(kernel, "def kernel(): return 1\n");
  const std::string graph = "HloModule k\n// source: " + kernel.string() + "\n";
  ASSERT_EQ(compile(write_graph(graph)).exit_code, 0);
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries().front();
  write_text(kernel, "def kernel(): return 2\n");
  auto x = run_tool("neuron_cache", {"explain", entry.string()});
  ASSERT_EQ(x.exit_code, 0) << x.describe();
  EXPECT_NE(x.out.find("; the files the graph names have changed since (their bytes key it); same compiler version\n"),
            std::string::npos)
      << x.out;
  EXPECT_TRUE(has_line(x.out, "a neuronx-cc command line through the masquerade will miss: no entry it made has this "
                              "graph for the current compiler version and the files the graph names as they are now "
                              "(to compare another command line, give it after --: neuron_cache explain TARGET -- "
                              "neuronx-cc compile GRAPH FLAGS... --output FILE)"))
      << x.out;
  ASSERT_EQ(compile(write_graph(graph)).exit_code, 0);
  EXPECT_EQ(compiles(), 2u);
}

// What is not a command line the masquerade caches is a usage error.
TEST_F(Masquerade, ExplainRefusesACommandLineItCannotRead) {
  ASSERT_EQ(compile(write_graph("HloModule a\n")).exit_code, 0);
  auto x = run_tool("neuron_cache", {"explain", entries().front().string(), "--", "neuronx-cc", "compile", "g.pb"});
  EXPECT_EQ(x.exit_code, 2) << x.describe();
  EXPECT_EQ(x.out, "");
  EXPECT_EQ(x.err, "neuron_cache: error: explain: the command line after -- is not one the masquerade caches (no "
                   "--output): give it as the frontend runs it, neuronx-cc compile GRAPH FLAGS... --output FILE\n");
}

} // namespace
} // namespace npc::test
