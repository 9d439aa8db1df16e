// The installed tree and the .deb, checked through the real tools: cmake
// --install, help2man's pages read by groff, the completion scripts run by
// bash, cpack, dpkg-deb and lintian. A tool that is missing fails the test
// that needs it, by name: nothing passes for want of a checker.

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "files.hpp"
#include "install_support.hpp"
#include "paths.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

namespace npc::test::install {
namespace {

using Words = std::vector<std::string>;

// cpack (strip, dpkg-shlibdeps) and lintian take seconds each on a busy
// 2-core machine; past this the test fails rather than waits.
constexpr std::chrono::milliseconds kToolTimeout{100000};

RunResult run_ok(const Words& argv, RunOptions options = {}) {
  options.timeout = kToolTimeout;
  RunResult r = run(argv, options);
  EXPECT_FALSE(r.signaled || r.timed_out || r.exit_code != 0) << r.describe();
  return r;
}

fs::path program_path(const std::string& name) { return npc::test::program(name); }

bool have(const std::string& tool) {
  return run({"sh", "-c", "command -v \"$1\"", "sh", tool}).exit_code == 0;
}

// Sources a completion script and runs its function as bash would for the
// words given, the last being the one under the cursor; prints COMPREPLY.
constexpr const char* kCompleteDriver = R"(
source "$1" || exit 90
spec=$(complete -p "$2") || exit 91
fn=${spec#*-F }; fn=${fn%% *}
COMP_WORDS=("${@:2}")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMPREPLY=()
"$fn" || exit 92
if (( ${#COMPREPLY[@]} )); then printf '%s\n' "${COMPREPLY[@]}"; fi
)";

class InstallTest : public TempDirTest {
protected:
  // What the completion of `words` offers, sorted; run in dir().
  Words complete(const Words& words) {
    Words argv = {"bash", "--norc", "--noprofile", "-c", kCompleteDriver, "complete",
                  (build_dir() / "completion" / words.front()).string()};
    argv.insert(argv.end(), words.begin(), words.end());
    RunOptions options;
    options.cwd = dir();
    return sorted_lines(run_ok(argv, options).out);
  }
};

TEST_F(InstallTest, CmakeInstallPutsExactlyTheExpectedFiles) {
  fs::path prefix = dir() / "prefix";
  run_ok({NPC_CMAKE_COMMAND, "--install", build_dir().string(), "--prefix", prefix.string()});
  EXPECT_EQ(files_under(prefix), expected_install_files());
  EXPECT_EQ(fs::read_symlink(prefix / kMasqueradeLink), kMasqueradeTarget);
  EXPECT_TRUE(fs::equivalent(prefix / kMasqueradeLink, prefix / "bin" / "neuron_cc_wrapper"));
  for (const auto& program : kPrograms) {
    auto perms = fs::status(prefix / "bin" / program).permissions();
    EXPECT_NE(perms & fs::perms::others_exec, fs::perms::none) << program;
  }
  std::string copyright = read_text(prefix / "share/doc/neuron-parallel-compile/copyright");
  EXPECT_TRUE(copyright.starts_with("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
      << copyright;
  EXPECT_NE(copyright.find("License: Apache-2.0\n"), std::string::npos) << copyright;
  EXPECT_NE(read_text(source_dir() / "LICENSE").find("Apache License\n                           Version 2.0"),
            std::string::npos)
      << "LICENSE is no longer Apache-2.0: update cmake/copyright.in";
}

TEST_F(InstallTest, ManPagesRenderAndNameEveryOptionOfHelp) {
  ASSERT_TRUE(have("groff")) << "groff is needed to check the man pages (apt-get install groff)";
  for (const auto& program : kPrograms) {
    SCOPED_TRACE(program);
    fs::path page = build_dir() / "man" / (program + ".1.gz");
    std::string roff = run_ok({"gzip", "-dc", page.string()}).out;
    std::string upper = program;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    EXPECT_NE(roff.find(".TH " + upper + " \"1\""), std::string::npos) << roff.substr(0, 300);
    // -ww: every warning; -z: no output, only the diagnostics.
    fs::path plain = dir() / (program + ".1");
    write_text(plain, roff);
    RunResult rendered = run_ok({"groff", "-man", "-Tutf8", "-ww", "-z", plain.string()});
    EXPECT_EQ(rendered.err, "");

    std::string help = run_ok({program_path(program).string(), "--help"}).out;
    Words options = long_options_in(help);
    EXPECT_GE(options.size(), 3u) << help;
    std::string words = roff_words(roff);
    for (const auto& option : options) EXPECT_NE(words.find(option), std::string::npos) << option;
    EXPECT_EQ(help.find("--print-bash-completion"), std::string::npos) << help;
    EXPECT_EQ(words.find("--print-bash-completion"), std::string::npos);
  }
}

TEST_F(InstallTest, CompletionCompletesSubcommandsOptionsAndPaths) {
  fs::create_directories(dir() / "d1");
  write_text(dir() / "f1", "");
  EXPECT_EQ(complete({"neuron_cache", "st"}), Words{"stats"});
  EXPECT_EQ(complete({"neuron_cache", "c"}), (Words{"clear-failed", "clear-locks"}));
  EXPECT_EQ(complete({"neuron_cache", "prune", "--d"}), Words{"--dry-run"});
  // Fallthrough: the program's options after a subcommand too.
  EXPECT_EQ(complete({"neuron_cache", "ls", "--js"}), Words{"--json"});
  EXPECT_EQ(complete({"neuron_cache", "--cache_dir", ""}), Words{"d1"});
  EXPECT_EQ(complete({"neuron_cache", "import", ""}), (Words{"d1", "f1"}));
  EXPECT_EQ(complete({"neuron_cache", "--cache_size", ""}), Words{});
  EXPECT_EQ(complete({"neuron_parallel_compile", "--num_p"}), Words{"--num_parallel"});
  EXPECT_EQ(complete({"neuron_parallel_compile", "--report", "f"}), Words{"f1"});
  EXPECT_EQ(complete({"neuron_parallel_compile", "--report", "=", "f"}), Words{"f1"});
  EXPECT_EQ(complete({"neuron_parallel_compile", "--parallel_compile_workdir", ""}), Words{"d1"});
  // From the training command on, its words are not ours.
  EXPECT_EQ(complete({"neuron_parallel_compile", "--num_parallel", "2", "python3", "--n"}), Words{});
  EXPECT_EQ(complete({"neuron_parallel_compile", "--", "python3", "f"}), Words{"f1"});
  Words commands = complete({"neuron_parallel_compile", "--num_parallel", "2", "bas"});
  EXPECT_NE(std::find(commands.begin(), commands.end(), "bash"), commands.end());
  for (const auto& c : commands) EXPECT_TRUE(c.starts_with("bas")) << c;
  EXPECT_EQ(complete({"neuron_cc_wrapper", "comp"}), (Words{"compile", "compile-entry"}));
  EXPECT_EQ(complete({"neuron_cc_wrapper", "compile-entry", "--no-w"}), Words{"--no-wait"});
  EXPECT_EQ(complete({"neuron_cc_wrapper", "compile-entry", ""}), Words{"d1"});
  EXPECT_EQ(complete({"neuron_cc_wrapper", "compile", "--graph", ""}), (Words{"d1", "f1"}));
  // The values of an option that takes one of a few.
  EXPECT_EQ(complete({"neuron_parallel_compile", "--command", ""}),
            (Words{"all", "analyze", "check", "clean", "clear-locks", "clear-neffs", "collect", "collect-and-compile",
                   "compile", "scan", "scan-with-failed"}));
  EXPECT_EQ(complete({"neuron_parallel_compile", "--command", "=", "clea"}), (Words{"clean", "clear-locks", "clear-neffs"}));
  EXPECT_EQ(complete({"neuron_parallel_compile", "--log_level", "W"}), Words{"WARNING"});
  EXPECT_EQ(complete({"neuron_cc_wrapper", "compile", "--log_level", "D"}), Words{"DEBUG"});
}

// The completion offers every option --help names (at some level), and
// never the hidden one.
TEST_F(InstallTest, CompletionOffersEveryOptionOfHelp) {
  const std::vector<Words> levels = {
      {"neuron_parallel_compile"},
      {"neuron_cache"}, {"neuron_cache", "ls"}, {"neuron_cache", "stats"}, {"neuron_cache", "prune"},
      {"neuron_cache", "verify"}, {"neuron_cache", "clear-locks"}, {"neuron_cache", "clear-failed"},
      {"neuron_cache", "rm"}, {"neuron_cache", "export"}, {"neuron_cache", "import"}, {"neuron_cache", "merge-traces"},
      {"neuron_cache", "misses"},
      {"neuron_cc_wrapper"}, {"neuron_cc_wrapper", "compile"}, {"neuron_cc_wrapper", "compile-entry"},
      {"neuron_cc_wrapper", "key"}};
  // Named in --help but not ours to complete: another program's option, a
  // compiler flag.
  const std::map<std::string, std::string> not_ours = {{"neuron_cache", "--report"},
                                                       {"neuron_cc_wrapper", "--target"}};
  for (const auto& program : kPrograms) {
    SCOPED_TRACE(program);
    Words offered;
    std::string help;
    for (const auto& level : levels) {
      if (level.front() != program) continue;
      Words argv = {program_path(program).string()};
      argv.insert(argv.end(), level.begin() + 1, level.end());
      argv.push_back("--help");
      help += run_ok(argv).out;
      Words words = level;
      words.push_back("--");
      for (auto& w : complete(words)) offered.push_back(w);
    }
    for (const auto& option : long_options_in(help)) {
      if (auto it = not_ours.find(program); it != not_ours.end() && it->second == option) continue;
      EXPECT_NE(std::find(offered.begin(), offered.end(), option), offered.end()) << option;
    }
    EXPECT_EQ(std::find(offered.begin(), offered.end(), "--print-bash-completion"), offered.end());
  }
}

TEST_F(InstallTest, DebHasItsFieldsFilesStrippedProgramsAndPassesLintian) {
  for (const char* tool : {"dpkg-deb", "dpkg-shlibdeps", "lintian", "readelf"})
    ASSERT_TRUE(have(tool)) << tool << " is needed to check the .deb (tools/setup.sh installs it)";
  fs::path out = dir() / "deb";
  RunOptions in_build;
  in_build.cwd = build_dir();
  run_ok({NPC_CPACK_COMMAND, "-G", "DEB", "-B", out.string()}, in_build);
  Words debs;
  for (const auto& name : names_in(out))
    if (name.ends_with(".deb")) debs.push_back(name);
  ASSERT_EQ(debs.size(), 1u);
  fs::path deb = out / debs.front();
  EXPECT_TRUE(debs.front().starts_with(std::string("neuron-parallel-compile_") + NPC_VERSION + "_")) << debs.front();

  auto field = [&](const std::string& name) {
    std::string value = run_ok({"dpkg-deb", "-f", deb.string(), name}).out;
    while (!value.empty() && value.back() == '\n') value.pop_back();
    return value;
  };
  EXPECT_EQ(field("Package"), "neuron-parallel-compile");
  EXPECT_EQ(field("Version"), NPC_VERSION);
  EXPECT_EQ(field("Section"), "devel");
  EXPECT_NE(field("Maintainer"), "");
  EXPECT_NE(field("Depends").find("libc6"), std::string::npos) << field("Depends");

  Words listed;
  for (const auto& line : sorted_lines(run_ok({"dpkg-deb", "-c", deb.string()}).out)) {
    if (line.starts_with("d")) continue; // directories
    auto at = line.find(" ./usr/");
    ASSERT_NE(at, std::string::npos) << line;
    std::string name = line.substr(at + 7);
    if (auto arrow = name.find(" -> "); arrow != std::string::npos) {
      EXPECT_EQ(name.substr(0, arrow), kMasqueradeLink) << line;
      EXPECT_EQ(name.substr(arrow + 4), kMasqueradeTarget) << line;
      name.resize(arrow);
    }
    listed.push_back(name);
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, expected_install_files());

  fs::path unpacked = dir() / "unpacked";
  run_ok({"dpkg-deb", "-x", deb.string(), unpacked.string()});
  for (const auto& program : kPrograms) {
    std::string sections = run_ok({"readelf", "-S", "--wide", (unpacked / "usr/bin" / program).string()}).out;
    EXPECT_EQ(sections.find(".symtab"), std::string::npos) << program << " is not stripped";
    EXPECT_EQ(sections.find(".debug_info"), std::string::npos) << program << " has debug info";
  }

  // As strict as CI's check of the .deb (tools/ci-checks.sh deb).
  RunResult lint = run({"lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", deb.string()},
                       {.timeout = kToolTimeout});
  EXPECT_FALSE(lint.timed_out || lint.signaled) << lint.describe();
  for (const auto& line : sorted_lines(lint.out))
    EXPECT_FALSE(line.starts_with("E: ") || line.starts_with("W: ")) << line;
  EXPECT_EQ(lint.exit_code, 0) << lint.describe();
}

} // namespace
} // namespace npc::test::install
