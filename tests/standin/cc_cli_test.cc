// The stand-in compiler's command line and its deterministic NEFF output.
#include <gtest/gtest.h>

#include <algorithm>

#include "sha256.h"
#include "standin_fixture.h"

namespace standin::test {
namespace {

constexpr char kDefaultVersion[] = "2.14.213.0+standin";
constexpr std::size_t kMinNeffBytes = 256;

class StandinCc : public StandinFixture {
 protected:
  void SetUp() override {
    StandinFixture::SetUp();
    graph_text_ = make_graph_text(kGraphBytes);
    graph_ = write_file("graph.hlo", graph_text_);
  }

  // Compiles graph_ with `flags` after the fixed part; returns the NEFF.
  std::string compile(const std::vector<std::string>& flags, const std::string& output = "out.neff",
                      const Env& env = {}) {
    std::vector<std::string> args{"compile", "--framework=XLA", graph_, "--output", path(output)};
    args.insert(args.end(), flags.begin(), flags.end());
    const RunResult result = run_compiler(args, env);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return read_file(path(output));
  }

  std::string graph_text_;
  std::string graph_;
};

TEST_F(StandinCc, VersionPrintsDefaultVersion) {
  const RunResult result = run({kCompilerBinary, "--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, std::string("NeuronX Compiler version ") + kDefaultVersion + "\n");
}

TEST_F(StandinCc, VersionComesFromEnvironment) {
  const RunResult result = run({kCompilerBinary, "--version"}, {{"STANDIN_CC_VERSION", "9.9.9"}});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "NeuronX Compiler version 9.9.9\n");
}

TEST_F(StandinCc, CompileWritesHeaderNamingGraphFlagsAndVersion) {
  const RunResult result = run_compiler(
      {"compile", "--framework=XLA", graph_, "--output", path("out.neff"), "--target=trn2", "-O1",
       "--model-type", "transformer"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("Compiler status PASS"), std::string::npos) << result.out;

  const std::string neff = read_file(path("out.neff"));
  const std::string expected_header = std::string("STANDIN-NEFF 1\n") +
                                      "compiler-version: " + kDefaultVersion + "\n" +
                                      "graph-sha256: " + sha256_hex(graph_text_) + "\n" +
                                      "graph-bytes: 1000\n" +
                                      "flags: --target=trn2 -O1 --model-type transformer\n" +
                                      "target: trn2\n" +
                                      "end-header\n";
  EXPECT_EQ(neff.substr(0, expected_header.size()), expected_header);
  EXPECT_EQ(neff.size(), kGraphBytes / 2);
}

TEST_F(StandinCc, NeffSizeIsHalfTheGraphWithAMinimum) {
  const std::string big = write_file("big.hlo", make_graph_text(10'000));
  ASSERT_EQ(run_compiler({"compile", big, "--output", path("big.neff")}).exit_code, 0);
  EXPECT_EQ(read_file(path("big.neff")).size(), 5'000u);

  const std::string tiny = write_file("tiny.hlo", "HloModule tiny\n");
  ASSERT_EQ(run_compiler({"compile", tiny, "--output", path("tiny.neff")}).exit_code, 0);
  EXPECT_EQ(read_file(path("tiny.neff")).size(), kMinNeffBytes);
  EXPECT_EQ(header_field(read_file(path("tiny.neff")), "target"), "trn1");
}

TEST_F(StandinCc, SameInputsGiveIdenticalBytes) {
  const std::string first = compile({"--target", "trn1", "-O2"}, "a.neff");
  const std::string second = compile({"--target", "trn1", "-O2"}, "b.neff");
  EXPECT_EQ(first, second);
}

TEST_F(StandinCc, DifferentFlagsGraphOrVersionGiveDifferentBytes) {
  const std::string base = compile({"-O2"}, "base.neff");
  EXPECT_NE(base, compile({"-O1"}, "flags.neff"));
  EXPECT_NE(base, compile({"-O2"}, "version.neff", {{"STANDIN_CC_VERSION", "2.0.0"}}));
  write_file("graph.hlo", make_graph_text(kGraphBytes, "other"));
  EXPECT_NE(base, compile({"-O2"}, "graph.neff"));
}

TEST_F(StandinCc, PathValuedFlagsAreRecordedWithoutTheirPaths) {
  const std::string neff =
      compile({"--logfile", path("cc.log"), "--workdir=" + path("work"), "--internal-x=1", "--internal-y"});
  EXPECT_EQ(header_field(neff, "flags"), "--logfile --workdir --internal-x=1 --internal-y");
  EXPECT_NE(read_file(path("cc.log")).find("Compiler status PASS"), std::string::npos);
}

TEST_F(StandinCc, AcceptsEveryDocumentedFlag) {
  const std::string neff = compile(
      {"--target", "inf2", "-O3", "--optlevel", "2", "--model-type=unet-inference", "--auto-cast", "matmult",
       "--auto-cast-type=fp8_e4m3", "--enable-fast-loading-neuron-binaries", "--enable-saturate-infinity",
       "--enable-mixed-precision-accumulation", "--distribution-strategy", "llm-training", "--verbose=debug",
       "--lnc", "2", "--logical-nc-config=1", "--pipeline", "compile", "--tensorizer-options=--no-fuse"});
  EXPECT_EQ(header_field(neff, "target"), "inf2");
}

TEST_F(StandinCc, OutputFlagMayComeFirstOrBeShort) {
  const RunResult result = run_compiler({"compile", "-o", path("short.neff"), graph_});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(header_field(read_file(path("short.neff")), "flags"), "");
}

TEST_F(StandinCc, SuccessLeavesNoTemporaryFiles) {
  compile({});
  std::vector<std::string> names = list_dir(dir());
  ASSERT_NE(std::find(names.begin(), names.end(), "out.neff"), names.end()) << "nothing was compiled to look after";
  for (const std::string& name : names) EXPECT_EQ(name.find("standin-tmp"), std::string::npos) << name;
}

TEST_F(StandinCc, UnknownFlagIsRejectedLikeArgparse) {
  const RunResult result =
      run_compiler({"compile", "--framework=XLA", graph_, "--output", path("o.neff"), "--foo"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "neuronx-cc: error: unrecognized arguments: --foo\n");
  EXPECT_FALSE(exists(path("o.neff")));
}

TEST_F(StandinCc, InvalidChoiceIsRejected) {
  const RunResult result = run_compiler({"compile", graph_, "--output", path("o.neff"), "--target=x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("neuronx-cc: error: argument --target: invalid choice: 'x'"), std::string::npos)
      << result.err;
}

TEST_F(StandinCc, SwitchWithValueIsRejected) {
  const RunResult result =
      run_compiler({"compile", graph_, "--output", path("o.neff"), "--enable-saturate-infinity=1"});
  EXPECT_EQ(result.exit_code, 2);
}

TEST_F(StandinCc, MissingOutputOrGraphIsAUsageError) {
  const RunResult no_output = run_compiler({"compile", "--framework=XLA", graph_});
  EXPECT_EQ(no_output.exit_code, 2);
  EXPECT_NE(no_output.err.find("required: --output"), std::string::npos) << no_output.err;

  const RunResult no_graph = run_compiler({"compile", "--output", path("o.neff")});
  EXPECT_EQ(no_graph.exit_code, 2);
  EXPECT_NE(no_graph.err.find("required: input_file"), std::string::npos) << no_graph.err;

  EXPECT_EQ(run_compiler({"compile", graph_, "--output"}).exit_code, 2);
  EXPECT_EQ(run_compiler({}).exit_code, 2);
  EXPECT_EQ(run_compiler({"link"}).exit_code, 2);
}

TEST_F(StandinCc, UnreadableGraphFailsWithExit1) {
  const RunResult result = run_compiler({"compile", path("missing.hlo"), "--output", path("o.neff")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot read graph file"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("Compiler status ERROR"), std::string::npos) << result.err;
}

TEST_F(StandinCc, MalformedEnvironmentIsAUsageError) {
  const RunResult result =
      run_compiler({"compile", graph_, "--output", path("o.neff")}, {{"STANDIN_CC_MODE", "fast"}});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("STANDIN_CC_MODE"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace standin::test
