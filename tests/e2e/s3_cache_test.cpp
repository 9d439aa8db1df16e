// neuron_cc_wrapper on an S3 cache (the run's RADOS Gateway on loopback): a miss
// compiles in the local mirror and uploads the entry; another node's mirror
// downloads it instead of compiling; extraction stores the graph in S3;
// two nodes at once compile a graph once; an unreachable endpoint is one
// warning and a local compile (the launcher fails loudly); the commands that do not drive S3 yet say so; the static
// wrapper hands S3 work to its dynamic build, and serves mirror hits alone.

#include <algorithm>
#include <sys/wait.h>

#include <npc/cache/key.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

using S3Cache = S3CacheTest;

TEST_F(S3Cache, AMissCompilesInTheMirrorAndUploadsTheWholeEntry) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  auto run = compile(g, dir() / "a.neff");
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 1u);
  // The lock object is gone; model.done is there with the rest.
  EXPECT_EQ(objects(), done_entry());
  EXPECT_EQ(object("/model.neff"), read_text(dir() / "a.neff"));
  EXPECT_EQ(object("/model.hlo_module.pb"), read_text(g));
  // The mirror holds the same entry, under <mirror>/s3/<bucket>/<prefix>.
  fs::path mirror = dir() / "node-a" / "s3" / "test-bucket" / "team" / (std::string("neuronxcc-") + kStandinVersion);
  ASSERT_EQ(names_in(mirror).size(), 1u);
  EXPECT_EQ(read_text(mirror / names_in(mirror)[0] / "model.neff"), read_text(dir() / "a.neff"));
  // A second compile on this node is a hit in the mirror: S3 is not needed.
  ASSERT_NO_FATAL_FAILURE(take_s3_away());
  auto again = compile(g, dir() / "a2.neff");
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 1u);
}

// The wrapper as `neuronx-cc` (the masquerade directory first on PATH) on an
// S3 cache: the static wrapper hands the command to its S3 build as
// as-neuronx-cc, which compiles and uploads; another node's frontend is
// served from S3 without compiling.
TEST_F(S3Cache, TheMasqueradeCompilesIntoS3AndAnotherNodeIsServedFromIt) {
  const fs::path masquerade = (bin_dir() / ".." / "libexec" / "neuron-parallel-compile" / "masquerade").lexically_normal();
  env_.erase("NEURON_CC");
  env_["PATH"] = masquerade.string() + ":" + standin_dir().string() + ":/usr/bin:/bin";
  env_["NEURON_COMPILE_CACHE_URL"] = kUrl;
  env_.erase("NEURON_CC_FLAGS");
  auto frontend = [&](const std::string& folder, std::map<std::string, std::string> env = {}) {
    fs::path graph_file = dir() / folder / "module.hlo.pb";
    write_text(graph_file, "HloModule a\n");
    return run({(masquerade / "neuronx-cc").string(), "compile", graph_file.string(), "--framework", "XLA", "-O2",
                "--output", (dir() / folder / "module.neff").string()},
               options(std::move(env)));
  };
  auto first = frontend("t1");
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(objects(), done_entry());
  auto other = frontend("t2", {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(read_text(dir() / "t2" / "module.neff"), read_text(dir() / "t1" / "module.neff"));
}

TEST_F(S3Cache, AnotherNodeDownloadsTheEntryInsteadOfCompiling) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  ASSERT_EQ(compile(g, dir() / "a.neff").exit_code, 0);
  auto other = compile(g, dir() / "b.neff", {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(read_text(dir() / "b.neff"), read_text(dir() / "a.neff"));
  EXPECT_EQ(objects(), done_entry(/*used=*/true)); // node B's download recorded as a use
}

// A result in S3 that cannot be used (a NEFF that fails its record, or a
// marker without its NEFF) is said once, compiled again, and replaced
// there by the new result under the entry's lock: the next node hits.
TEST_F(S3Cache, AnUnusableResultInS3IsSaidOnceAndReplaced) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  ASSERT_EQ(compile(g, dir() / "a.neff").exit_code, 0);
  const std::string good = read_text(dir() / "a.neff");
  auto key_of = [&](const std::string& suffix) {
    auto all = client()->list_all(kS3TestBucket, {});
    for (const auto& o : all->objects)
      if (o.key.ends_with(suffix)) return o.key;
    return std::string();
  };
  const std::string neff_key = key_of("/model.neff");
  ASSERT_FALSE(neff_key.empty());

  struct Damage {
    const char* node;
    const char* said;
  };
  for (const Damage& damage : {Damage{"node-b", "its NEFF does not match its integrity record"},
                               Damage{"node-c", "model.done is there but model.neff is not"}}) {
    if (std::string(damage.node) == "node-b") {
      ASSERT_TRUE(client()->put_object(kS3TestBucket, neff_key, std::string(good.size(), 'x')));
    } else {
      ASSERT_TRUE(client()->delete_object(kS3TestBucket, neff_key).ok());
    }
    std::size_t before = compiles();
    auto fresh = compile(g, dir() / (std::string(damage.node) + ".neff"),
                         {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / damage.node).string()}});
    ASSERT_EQ(fresh.exit_code, 0) << fresh.describe();
    EXPECT_EQ(compiles(), before + 1) << damage.node;
    EXPECT_EQ(std::count(fresh.err.begin(), fresh.err.end(), '\n'), 1) << fresh.err;
    EXPECT_NE(fresh.err.find(damage.said), std::string::npos) << fresh.err;
    EXPECT_EQ(object("/model.neff"), good) << damage.node << ": replaced in S3";
    EXPECT_EQ(read_text(dir() / (std::string(damage.node) + ".neff")), good);
  }
  auto verify = run_tool("neuron_cache", {"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.describe();
  std::size_t before = compiles();
  auto next = compile(g, dir() / "d.neff", {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-d").string()}});
  ASSERT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_EQ(compiles(), before) << "the replaced result is a hit";
  EXPECT_EQ(next.err, "");
}

TEST_F(S3Cache, ExtractionStoresTheGraphInS3AndNamesItsUrl) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  fs::path path_log = dir() / "paths.log";
  auto run = compile(g, dir() / "a.neff",
                     {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log.string()}});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_EQ(objects(), (std::vector<std::string>{version_dir() + "/E/compile_flags.json",
                                                 version_dir() + "/E/model.hlo_module.pb"}));
  std::string logged = read_text(path_log);
  ASSERT_TRUE(logged.starts_with("s3://test-bucket/" + version_dir() + "/MODULE_")) << logged;
  ASSERT_TRUE(logged.ends_with("/model.hlo_module.pb\n")) << logged;
  EXPECT_NE(run.out.find("Extracting graphs (" + logged.substr(0, logged.size() - 1) + ")"), std::string::npos)
      << run.out;
  EXPECT_EQ(object("/model.hlo_module.pb"), read_text(g));
}

TEST_F(S3Cache, ACompileFailureIsUploadedAndAnotherNodeSeesItCached) {
  fs::path g = graph("bad.hlo", "HloModule bad\n");
  auto run = compile(g, dir() / "a.neff", {{"STANDIN_CC_FAULT", "fail"}});
  EXPECT_EQ(run.exit_code, 1) << run.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(objects(), (std::vector<std::string>{version_dir() + "/E/compile_flags.json",
                                                 version_dir() + "/E/model.hlo_module.pb",
                                                 version_dir() + "/E/model.log", version_dir() + "/E/npc-entry.json"}));
  auto other = compile(g, dir() / "b.neff", {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  EXPECT_EQ(other.exit_code, 1) << other.describe();
  EXPECT_EQ(compiles(), 1u); // cached, not compiled again
  EXPECT_NE(other.err.find("model.log"), std::string::npos) << other.err;
}

TEST_F(S3Cache, TwoNodesAtOnceCompileAGraphOnce) {
  fs::path g = graph("slow.hlo", "HloModule slow\n// standin-cost-ms: 1500\n");
  pid_t a = start_tool("neuron_cc_wrapper", {"compile", "--graph", g.string(), "--output", (dir() / "a.neff").string()},
                       {}, dir() / "a.out");
  pid_t b = start_tool("neuron_cc_wrapper", {"compile", "--graph", g.string(), "--output", (dir() / "b.neff").string()},
                       {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}}, dir() / "b.out");
  for (pid_t pid : {a, b}) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(dir() / "a.out") << read_text(dir() / "b.out");
  }
  EXPECT_EQ(compiles(), 1u) << read_text(dir() / "a.out") << read_text(dir() / "b.out");
  EXPECT_EQ(read_text(dir() / "a.neff"), read_text(dir() / "b.neff"));
  EXPECT_EQ(objects(), done_entry(/*used=*/true)); // the waiter downloaded it
}

// A cache is an optimisation: the training run's compile goes on without
// an S3 cache it cannot reach, saying so once and naming the endpoint. The
// launcher, whose job is to fill the cache, fails loudly.
TEST_F(S3Cache, AnUnreachableEndpointIsOneWarningAndALocalCompile) {
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(free_loopback_port());
  auto run = compile(graph("a.hlo", "HloModule a\n"), dir() / "a.neff", {{"AWS_ENDPOINT_URL_S3", endpoint}});
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_TRUE(fs::exists(dir() / "a.neff"));
  EXPECT_NE(run.err.find("warning: the shared cache s3://"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("cannot reach S3 endpoint " + endpoint), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;

  auto launcher = run_tool("neuron_parallel_compile",
                           {"--parallel_compile_workdir", (dir() / "wd").string(), "--command", "compile"},
                           {{"AWS_ENDPOINT_URL_S3", endpoint}});
  EXPECT_EQ(launcher.exit_code, 3) << launcher.describe();
  EXPECT_NE(launcher.err.find("cannot reach S3 endpoint " + endpoint), std::string::npos) << launcher.err;
}

// The static wrapper, copied where its dynamic build is not beside it.
class S3CacheStaticWrapper : public S3CacheTest {
protected:
  void SetUp() override {
    S3CacheTest::SetUp();
    if (wrapper_s3_build().empty()) GTEST_SKIP() << "built without a static wrapper (a sanitizer build)";
    alone_ = dir() / "alone" / "bin" / "neuron_cc_wrapper";
    fs::create_directories(alone_.parent_path());
    fs::copy_file(program("neuron_cc_wrapper"), alone_);
  }
  RunResult compile_alone(const fs::path& g, const fs::path& out) {
    return run_tool(alone_.string(), {"compile", "--graph", g.string(), "--output", out.string()});
  }
  fs::path alone_;
};

// A hit in the mirror needs no S3, so not the dynamic build either: served
// with the server stopped and nothing beside the program.
TEST_F(S3CacheStaticWrapper, AHitInTheMirrorIsServedWithoutTheDynamicBuild) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  ASSERT_EQ(compile(g, dir() / "a.neff").exit_code, 0); // through the dynamic build: S3 is used
  EXPECT_EQ(compiles(), 1u);
  ASSERT_NO_FATAL_FAILURE(take_s3_away());
  auto hit = compile_alone(g, dir() / "b.neff");
  ASSERT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(read_text(dir() / "b.neff"), read_text(dir() / "a.neff"));
  EXPECT_NE(hit.out.find("Using a cached neff at "), std::string::npos) << hit.out;
  EXPECT_EQ(compiles(), 1u);
}

// A miss needs S3: without the dynamic build, one line naming the path it
// looked for, exit 3, and nothing stored in the mirror or in S3.
TEST_F(S3CacheStaticWrapper, AMissWithoutTheDynamicBuildSaysWhereItLookedAndExits3) {
  fs::path g = graph("a.hlo", "HloModule a\n");
  auto miss = compile_alone(g, dir() / "a.neff");
  EXPECT_EQ(miss.exit_code, 3) << miss.describe();
  fs::path expected = (alone_.parent_path() / NPC_WRAPPER_S3_BUILD).lexically_normal();
  EXPECT_NE(miss.err.find("an s3:// cache needs " + expected.string() +
                          " (neuron_cc_wrapper built with S3 support), which cannot be run: No such file or directory; "
                          "reinstall neuron-parallel-compile"),
            std::string::npos)
      << miss.err;
  EXPECT_EQ(std::count(miss.err.begin(), miss.err.end(), '\n'), 1) << miss.err;
  EXPECT_EQ(compiles(), 0u);
  EXPECT_EQ(objects(), std::vector<std::string>{});
  fs::path mirror_version = dir() / "node-a" / "s3" / "test-bucket" / "team" / (std::string("neuronxcc-") + kStandinVersion);
  EXPECT_EQ(names_in(mirror_version), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(dir() / "a.neff"));
}

} // namespace
} // namespace npc::test
