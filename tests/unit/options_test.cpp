// launcher/options: the launcher's own options end where the user's command
// starts; nothing of the command is read as ours.

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/launcher/options.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>

#include "scoped_env.hpp"

namespace npc::launcher {
namespace {

using Words = std::vector<std::string>;

constexpr const char* kRetriesVar = "NEURON_PARALLEL_COMPILE_MAX_RETRIES";

// Sets or unsets an environment variable for one test, restoring it after.
using test::ScopedEnv;

Options parse(Words words) {
  words.insert(words.begin(), "neuron_parallel_compile");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return parse_options(static_cast<int>(words.size()), argv.data());
}

std::string usage_error_of(const Words& words) {
  try {
    auto options = parse(words);
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception: " << e.what();
  }
  return "";
}

void expect_error_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
}

class OptionsTest : public ::testing::Test {
protected:
  ScopedEnv no_retries_env{kRetriesVar, nullptr};
};

TEST_F(OptionsTest, DefaultsWithJustACommand) {
  Options o = parse({"python", "train.py"});
  EXPECT_EQ(o.mode, Mode::collect_and_compile);
  EXPECT_EQ(o.command, (Words{"python", "train.py"}));
  EXPECT_FALSE(o.num_parallel.has_value());
  EXPECT_EQ(o.node_id, 0);
  EXPECT_EQ(o.world_size, 1);
  EXPECT_EQ(o.max_retries, 0);
  EXPECT_FALSE(o.compile_timeout.has_value());
  EXPECT_FALSE(o.memory_per_compile.has_value());
  EXPECT_FALSE(o.memory_budget.has_value());
  EXPECT_FALSE(o.dry_run);
  EXPECT_FALSE(o.log_level.has_value());
}

TEST_F(OptionsTest, TheUsersCommandIsKeptExactly) {
  Options o = parse({"--num_parallel", "2", "torchrun", "--nproc_per_node=2", "train.py", "--log_level", "X",
                     "--world_size", "4", "--num_parallel", "3"});
  EXPECT_EQ(o.num_parallel, 2);
  EXPECT_EQ(o.world_size, 1);
  EXPECT_FALSE(o.log_level.has_value());
  EXPECT_EQ(o.command, (Words{"torchrun", "--nproc_per_node=2", "train.py", "--log_level", "X",
                              "--world_size", "4", "--num_parallel", "3"}));
}

TEST_F(OptionsTest, ParsingStopsAtTheFirstNonOptionWord) {
  Options o = parse({"--num_parallel", "2", "python", "-c", "print(1)", "--dry-run", "--", "--report", "r.json"});
  EXPECT_FALSE(o.dry_run);
  EXPECT_FALSE(o.report.has_value());
  EXPECT_EQ(o.command, (Words{"python", "-c", "print(1)", "--dry-run", "--", "--report", "r.json"}));
}

TEST_F(OptionsTest, FlagAtTheEndOfOurOptions) {
  Options o = parse({"--command", "compile", "--compiler", "/opt/neuronx-cc", "--dry-run"});
  EXPECT_EQ(o.mode, Mode::compile);
  EXPECT_EQ(o.compiler, std::string("/opt/neuronx-cc"));
  EXPECT_TRUE(o.dry_run);
  EXPECT_TRUE(o.command.empty());
}

// Regression (fixed): find_command_start() in src/launcher/options.cpp skips a value word
// after every known option with `option->get_type_size() > 0`, but CLI11
// (2.1) reports a type size of 1 for flags too (--dry-run, --help,
// --version). So the word after --dry-run is swallowed as its "value":
// `neuron_parallel_compile --dry-run python -c x` fails with "unknown option
// '-c' before the command", and `--dry-run python train.py` loses "python".
// Suggested fix: skip a value only when `option->get_expected_max() > 0`
// (0 for flags).
TEST_F(OptionsTest, FlagDoesNotSwallowTheCommand) {
  Options o = parse({"--dry-run", "python", "-c", "print(1)"});
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.command, (Words{"python", "-c", "print(1)"}));
  Options p = parse({"--dry-run", "torchrun", "train.py"});
  EXPECT_EQ(p.command, (Words{"torchrun", "train.py"}));
}

// Same bug as above: the option after a flag is taken as the flag's value.
TEST_F(OptionsTest, FlagBeforeAnotherOption) {
  Options o = parse({"--compiler", "/opt/neuronx-cc", "--dry-run", "--command", "compile"});
  EXPECT_EQ(o.mode, Mode::compile);
  EXPECT_TRUE(o.dry_run);
  EXPECT_TRUE(o.command.empty());
}

TEST_F(OptionsTest, OptionValuesAreNotTakenForTheCommand) {
  Options o = parse({"--parallel_compile_workdir", "/w", "--report=/r.json", "--log_level", "INFO",
                     "--node_id", "1", "--world_size", "2", "train.py"});
  EXPECT_EQ(o.workdir, fs::path("/w"));
  EXPECT_EQ(o.report, fs::path("/r.json"));
  EXPECT_EQ(o.log_level, std::string("INFO"));
  EXPECT_EQ(o.node_id, 1);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_EQ(o.command, Words{"train.py"});
}

TEST_F(OptionsTest, DoubleDashSeparatesACommandThatLooksLikeAnOption) {
  Options o = parse({"--num_parallel=4", "--", "-weird", "--x"});
  EXPECT_EQ(o.num_parallel, 4);
  EXPECT_EQ(o.command, (Words{"-weird", "--x"}));
  EXPECT_EQ(parse({"--", "--"}).command, Words{"--"});
  EXPECT_EQ(parse({"--", "python", "x.py"}).command, (Words{"python", "x.py"}));
}

TEST_F(OptionsTest, UnknownOptionBeforeTheCommandIsAUsageError) {
  expect_error_mentions(usage_error_of({"--bogus", "train.py"}), {"'--bogus'"});
  expect_error_mentions(usage_error_of({"--num_parallel=2", "--nproc_per_node=2", "train.py"}),
                        {"'--nproc_per_node=2'"});
}

// As the original's argparse: a unique prefix of a long option is that
// option, before the command only; an ambiguous one names the candidates.
TEST_F(OptionsTest, AUniquePrefixOfALongOptionIsThatOption) {
  Options o = parse({"--num", "2", "--log=WARNING", "--parallel", "/w", "--dry", "--comm", "compile"});
  EXPECT_EQ(o.num_parallel, 2);
  EXPECT_EQ(o.log_level, std::string("WARNING"));
  EXPECT_EQ(o.workdir, fs::path("/w"));
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.mode, Mode::compile);
  // The user's command keeps its own options as they are.
  Options train = parse({"--num=2", "python", "train.py", "--log", "x"});
  EXPECT_EQ(train.num_parallel, 2);
  EXPECT_EQ(train.command, (Words{"python", "train.py", "--log", "x"}));
  expect_error_mentions(usage_error_of({"--n", "2", "train.py"}),
                        {"ambiguous option '--n'", "--num_parallel", "--node_id"});
  expect_error_mentions(usage_error_of({"--m", "1", "train.py"}),
                        {"ambiguous option '--m'", "--max-retries", "--memory-budget"});
}

TEST_F(OptionsTest, CommandModes) {
  struct Case {
    const char* name;
    Mode mode;
  };
  for (const Case& c : {Case{"compile", Mode::compile}, Case{"clean", Mode::clean},
                        Case{"clear-locks", Mode::clear_locks}, Case{"clear-neffs", Mode::clear_neffs},
                        Case{"scan", Mode::scan}, Case{"scan-with-failed", Mode::scan_with_failed}}) {
    EXPECT_EQ(parse({"--command", c.name}).mode, c.mode) << c.name;
    EXPECT_EQ(parse({std::string("--command=") + c.name}).mode, c.mode) << c.name;
    EXPECT_FALSE(mode_runs_trial(c.mode)) << c.name;
  }
  EXPECT_EQ(parse({"--command", "collect", "python", "t.py"}).mode, Mode::collect);
  EXPECT_EQ(parse({"--command", "all", "python", "t.py"}).mode, Mode::collect_and_compile);
  EXPECT_EQ(parse({"--command=collect-and-compile", "python"}).mode, Mode::collect_and_compile);
  EXPECT_TRUE(mode_runs_trial(Mode::collect));
  EXPECT_TRUE(mode_runs_trial(Mode::collect_and_compile));
}

TEST_F(OptionsTest, BadCommandModeIsAUsageError) {
  expect_error_mentions(usage_error_of({"--command", "bogus"}), {"--command", "'bogus'"});
  expect_error_mentions(usage_error_of({"--command=Compile"}), {"--command", "'Compile'"});
}

TEST_F(OptionsTest, NodeIdMustBeBelowWorldSize) {
  expect_error_mentions(usage_error_of({"--node_id", "2", "--world_size", "2", "python"}),
                        {"--node_id 2", "--world_size 2"});
  expect_error_mentions(usage_error_of({"--node_id=1", "python"}), {"--node_id 1", "--world_size 1"});
  EXPECT_EQ(parse({"--node_id", "1", "--world_size", "2", "python"}).node_id, 1);
}

TEST_F(OptionsTest, NumParallelMustBeAWholeNumberInRangeAndTheErrorSaysWhich) {
  EXPECT_EQ(usage_error_of({"--num_parallel", "0", "python"}),
            "--num_parallel: 0 is out of range (give 1 to 4096) (run with --help for usage)");
  EXPECT_EQ(usage_error_of({"--num_parallel", "two", "python"}),
            "--num_parallel: 'two' is not a whole number (give 1 to 4096) (run with --help for usage)");
  EXPECT_EQ(usage_error_of({"--num_parallel=3x", "python"}),
            "--num_parallel: '3x' is not a whole number (give 1 to 4096) (run with --help for usage)");
  EXPECT_EQ(usage_error_of({"--num_parallel", "99999999999999999999", "python"}),
            "--num_parallel: 99999999999999999999 is out of range (give 1 to 4096) (run with --help for usage)");
  EXPECT_EQ(parse({"--num_parallel", "4096", "python"}).num_parallel, 4096);
}

TEST_F(OptionsTest, MaxRetriesFromTheEnvironment) {
  ScopedEnv env(kRetriesVar, "3");
  EXPECT_EQ(parse({"python"}).max_retries, 3);
  // The command line wins over the environment.
  EXPECT_EQ(parse({"--max-retries", "5", "python"}).max_retries, 5);
  EXPECT_EQ(parse({"--max-retries=0", "python"}).max_retries, 0);
}

TEST_F(OptionsTest, BadMaxRetriesInTheEnvironmentIsAUsageError) {
  ScopedEnv env(kRetriesVar, "abc");
  expect_error_mentions(usage_error_of({"python"}), {kRetriesVar, "'abc'"});
}

TEST_F(OptionsTest, BadMaxRetriesOnTheCommandLineIsAUsageError) {
  expect_error_mentions(usage_error_of({"--max-retries", "-1", "python"}), {"--max-retries", "'-1'"});
  expect_error_mentions(usage_error_of({"--max-retries=1001", "python"}), {"--max-retries", "'1001'"});
  EXPECT_EQ(parse({"--max-retries", "1000", "python"}).max_retries, 1000);
}

TEST_F(OptionsTest, EnvironmentIsRestoredAfterEachTest) {
  EXPECT_EQ(std::getenv(kRetriesVar), nullptr);
  EXPECT_EQ(parse({"python"}).max_retries, 0);
}

TEST_F(OptionsTest, MemoryPerCompile) {
  EXPECT_FALSE(parse({"--memory-per-compile", "auto", "python"}).memory_per_compile.has_value());
  EXPECT_FALSE(parse({"--memory-per-compile=AUTO", "python"}).memory_per_compile.has_value());
  EXPECT_EQ(parse({"--memory-per-compile", "8GB", "python"}).memory_per_compile, 8'000'000'000ULL);
  EXPECT_EQ(parse({"--memory-per-compile=8GiB", "python"}).memory_per_compile, 8ULL << 30);
  expect_error_mentions(usage_error_of({"--memory-per-compile", "bad", "python"}), {"--memory-per-compile", "'bad'"});
  expect_error_mentions(usage_error_of({"--memory-per-compile", "0", "python"}), {"--memory-per-compile", "'0'"});
}

TEST_F(OptionsTest, MemoryBudgetAndTimeout) {
  Options o = parse({"--memory-budget", "64GB", "--compile-timeout", "1.5", "python"});
  EXPECT_EQ(o.memory_budget, 64'000'000'000ULL);
  EXPECT_EQ(o.compile_timeout, std::chrono::milliseconds(1500));
  expect_error_mentions(usage_error_of({"--compile-timeout", "0", "python"}), {"--compile-timeout", "'0'"});
  expect_error_mentions(usage_error_of({"--memory-budget", "lots", "python"}), {"--memory-budget", "'lots'"});
}

TEST_F(OptionsTest, LogLevelIsChecked) {
  EXPECT_EQ(parse({"--log_level", "debug", "python"}).log_level, std::string("debug"));
  expect_error_mentions(usage_error_of({"--log_level", "LOUD", "python"}), {"--log_level", "'LOUD'"});
}

TEST_F(OptionsTest, TrialModeWithoutACommandIsAUsageError) {
  expect_error_mentions(usage_error_of({}), {"no command"});
  expect_error_mentions(usage_error_of({"--num_parallel", "2"}), {"no command"});
  expect_error_mentions(usage_error_of({"--command", "collect"}), {"no command"});
  expect_error_mentions(usage_error_of({"--"}), {"no command"});
}

TEST_F(OptionsTest, ModeWithoutATrialRefusesACommand) {
  expect_error_mentions(usage_error_of({"--command", "scan", "python", "train.py"}), {"--command scan", "python"});
  expect_error_mentions(usage_error_of({"--command=compile", "--", "python"}), {"--command compile", "python"});
}

// What a mode would not act on is refused, never silently ignored: a
// --dry-run of clean would remove for real, a --report of a scan would
// never be written, and a --report and a --trace at one path would leave
// one of them.
TEST_F(OptionsTest, OutputsAndADryRunTheModeWouldIgnoreAreRefused) {
  EXPECT_EQ(usage_error_of({"--command", "clean", "--dry-run"}),
            "--dry-run shows what a pre-compile would compile, and --command clean compiles nothing: it would run "
            "for real. Leave out --dry-run (--command scan shows the cache's states and changes nothing)");
  EXPECT_EQ(usage_error_of({"--command", "scan", "--report", "r.json"}),
            "--report is written by a run that compiles, and --command scan compiles nothing: leave out --report");
  EXPECT_EQ(usage_error_of({"--command", "collect", "--report", "r.json", "python"}),
            "--report is written by a run that compiles, and --command collect compiles nothing: leave out --report");
  EXPECT_EQ(usage_error_of({"--dry-run", "--report", "r.json", "--command", "compile"}),
            "--report is written by a run that compiles, and --dry-run compiles nothing: leave out --report");
  EXPECT_EQ(usage_error_of({"--report", "r.json", "--trace", "./r.json", "python"}),
            "--report and --trace name the same file, r.json: name a file for each");
  // What the mode uses stays.
  EXPECT_TRUE(parse({"--command", "compile", "--dry-run"}).dry_run);
  EXPECT_TRUE(parse({"--dry-run", "python"}).dry_run);
  EXPECT_EQ(parse({"--command", "scan", "--trace", "t.json"}).trace, fs::path("t.json"));
  EXPECT_EQ(parse({"--report", "r.json", "--trace", "t.json", "python"}).report, fs::path("r.json"));
  // A device is written through: it takes both.
  EXPECT_EQ(parse({"--report", "/dev/null", "--trace", "/dev/null", "python"}).trace, fs::path("/dev/null"));
}

// One file reached two ways: through a link after a missing folder and
// "..", which weakly_canonical alone leaves unresolved, and by its own name.
TEST_F(OptionsTest, AReportAndATraceAtOneFileThroughALinkAreRefused) {
  util::TempDir dir(fs::temp_directory_path(), "npc-options-");
  ASSERT_TRUE(util::ensure_dir(dir.path() / "out").ok());
  fs::create_directory_symlink(dir.path() / "out", dir.path() / "link");
  const std::string through_link = (dir.path() / "missing" / ".." / "link" / "r.json").string();
  const std::string direct = (dir.path() / "out" / "r.json").string();
  EXPECT_EQ(usage_error_of({"--report", through_link, "--trace", direct, "python"}),
            "--report and --trace name the same file, " + through_link + ": name a file for each");
}

} // namespace
} // namespace npc::launcher
