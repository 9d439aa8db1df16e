// neuron_cc_wrapper on an S3 cache (a real s3rver on loopback): a miss
// compiles in the local mirror and uploads the entry; another node's mirror
// downloads it instead of compiling; extraction stores the graph in S3;
// two nodes at once compile a graph once; an unreachable endpoint is one
// line and exit 3; the commands that do not drive S3 yet say so.

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
  server_.stop();
  auto again = compile(g, dir() / "a2.neff");
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 1u);
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

TEST_F(S3Cache, AnUnreachableEndpointIsOneLineAndExit3) {
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(free_loopback_port());
  auto run = compile(graph("a.hlo", "HloModule a\n"), dir() / "a.neff", {{"AWS_ENDPOINT_URL_S3", endpoint}});
  EXPECT_EQ(run.exit_code, 3) << run.describe();
  EXPECT_NE(run.err.find("cannot reach S3 endpoint " + endpoint), std::string::npos) << run.err;
  EXPECT_EQ(compiles(), 0u);
}

} // namespace
} // namespace npc::test
