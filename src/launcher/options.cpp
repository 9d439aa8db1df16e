#include <npc/launcher/options.hpp>

#include <map>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <npc/launcher/run_trace.hpp>
#include <npc/util/bash_completion.hpp>
#include <npc/util/command_line.hpp>
#include <npc/util/log.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

namespace {

const std::map<std::string, Mode> kModes = {
    {"collect-and-compile", Mode::collect_and_compile}, {"all", Mode::collect_and_compile},
    {"collect", Mode::collect},          {"compile", Mode::compile},
    {"check", Mode::check},
    {"clean", Mode::clean},              {"clear-locks", Mode::clear_locks},
    {"clear-neffs", Mode::clear_neffs},  {"scan", Mode::scan},
    {"scan-with-failed", Mode::scan_with_failed}, {"analyze", Mode::analyze}};

// The long option `name` ("--num") abbreviates, as the original's argparse
// takes any unique prefix of a long option ("--num" for "--num_parallel",
// "--log" for "--log_level"); nullptr when it abbreviates none. Two or more
// are a usage error naming them.
const CLI::Option* abbreviated_option(const CLI::App& app, const std::string& name) {
  if (!name.starts_with("--") || name.size() < 3) return nullptr;
  std::string prefix = name.substr(2);
  std::vector<const CLI::Option*> matches;
  std::string names;
  for (const CLI::Option* option : app.get_options()) {
    for (const auto& long_name : option->get_lnames()) {
      if (!long_name.starts_with(prefix) || long_name.starts_with("print-")) continue;
      matches.push_back(option);
      names += (names.empty() ? "--" : ", --") + long_name;
      break;
    }
  }
  if (matches.size() > 1) throw UsageError("ambiguous option '" + name + "': could match " + names);
  return matches.empty() ? nullptr : matches.front();
}

// Where our options end: at "--", or at the first word that is not one of
// our options or an option's value. Unknown words starting with '-' before
// that are errors, not the start of the user's command. A unique prefix of
// one of our long options is written out in full.
size_t find_command_start(const CLI::App& app, std::vector<std::string>& words, bool& saw_separator) {
  saw_separator = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--") {
      saw_separator = true;
      return i;
    }
    if (word.empty() || word[0] != '-' || word == "-") return i;
    std::string name = word.substr(0, word.find('='));
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option == nullptr) {
      option = abbreviated_option(app, name);
      if (option == nullptr)
        throw UsageError("unknown option '" + word +
                         "' before the command (put the command after -- if it starts with '-')");
      words[i] = "--" + option->get_lnames().front() + word.substr(name.size());
    }
    bool inline_value = words[i].find('=') != std::string::npos;
    // Flags (--dry-run, --help) report a type size too; only options that
    // expect a value take the next word.
    if (option->get_expected_max() > 0 && !inline_value) ++i; // skip its value
  }
  return words.size();
}


// An option the run would not act on is refused, never silently ignored:
// a --dry-run of clean would remove every entry for real, a --report of a
// run that compiles nothing would never be written, and a --report and a
// --trace at one path would leave only the one written last.
void refuse_unused_outputs(const Options& options, const std::string& mode) {
  const bool maintenance = !mode_runs_trial(options.mode) && !mode_compiles(options.mode);
  if (options.dry_run && maintenance)
    throw UsageError("--dry-run shows what a pre-compile would compile, and --command " + mode +
                     " compiles nothing: it would run for real. Leave out --dry-run (--command scan shows the "
                     "cache's states and changes nothing)");
  if (options.dry_run && options.mode == Mode::check)
    throw UsageError("--command check compiles nothing already, and says what the training run would compile: "
                     "leave out --dry-run");
  if (options.report && (!mode_compiles(options.mode) || options.dry_run))
    throw UsageError("--report is written by a run that compiles, and " +
                     (options.dry_run ? std::string("--dry-run") : "--command " + mode) +
                     " compiles nothing: leave out --report");
  // Only a file they would replace: a device (/dev/null) takes both.
  if (options.report && options.trace) {
    auto report = util::resolve_output(*options.report), trace = util::resolve_output(*options.trace);
    auto where = [](const util::OutputTarget& target) {
      std::error_code ec;
      fs::path canonical = util::fully_resolved(fs::absolute(target.path), ec);
      return ec ? target.path : canonical;
    };
    if (report && trace && report->kind == util::OutputKind::replace && trace->kind == util::OutputKind::replace &&
        where(*report) == where(*trace))
      throw UsageError("--report and --trace name the same file, " + options.report->string() +
                       ": name a file for each");
  }
}

} // namespace

std::string mode_name(Mode mode) {
  for (const auto& [name, m] : kModes)
    if (m == mode && name != "all") return name;
  return "?";
}

bool mode_compiles(Mode mode) { return mode == Mode::collect_and_compile || mode == Mode::compile; }

bool mode_runs_trial(Mode mode) {
  return mode == Mode::collect_and_compile || mode == Mode::collect || mode == Mode::check;
}

Options parse_options(int argc, char** argv) {
  Options options;
  CLI::App app{"Extract the graphs of a short trial run of a training command, compile them\n"
               "in parallel into the Neuron persistent cache, so the real run compiles nothing.",
               "neuron_parallel_compile"};
  app.footer("usage: neuron_parallel_compile [OPTIONS] [--] COMMAND [ARGS...]\n"
             "Exit status, as the original's: the number of graphs that failed to compile (0: all\n"
             "compiled or cached; capped at 255); 1 also when the training command failed in the\n"
             "trial, or it extracted graphs none of which could be taken; 2 usage or configuration\n"
             "error; 3 cache or compiler unusable, or --report or --trace cannot be written; 128+N\n"
             "interrupted by signal N (130: Ctrl-C).");
  app.set_version_flag("--version", std::string("neuron_parallel_compile ") + NPC_VERSION);
  std::string mode = "collect-and-compile", timeout, memory_per_compile = "auto", memory_budget;
  std::string max_retries, lock_timeout;
  app.add_option("--command", mode,
                 "What to do (default collect-and-compile, or all: the trial, then the compiles; collect: the "
                 "trial only; compile: the pending graphs; check: the trial, then exit 0 only if every graph it produced "
                 "is compiled in the cache, else list those the training run would compile and exit with their "
                 "count; analyze is not available)")
      ->type_name("{collect-and-compile,collect,compile,all,check,clean,clear-locks,clear-neffs,scan,scan-with-failed,"
                  "analyze}");
  app.add_option("--num_parallel", options.num_parallel,
                 "Compiles at once (default: ceil(total memory / 64 GiB), more once peaks are learned)")
      ->check(util::whole_number(1, 4096));
  app.add_flag("--static_schedule", options.static_schedule,
               "With --world_size: each launcher takes a contiguous share of the sorted entries, "
               "then helps the 8 before it");
  app.add_option("--node_id", options.node_id, "This launcher's index among --world_size launchers sharing one cache")
      ->check(util::whole_number(0, 1 << 20));
  app.add_option("--world_size", options.world_size, "Number of launchers sharing one cache")
      ->check(util::whole_number(1, 1 << 20));
  app.add_option("--parallel_compile_workdir", options.workdir,
                 "Where trial logs and compile logs go (default: /tmp/$USER/parallel_compile_workdir)")
      ->type_name("DIR");
  app.add_option("--log_level", options.log_level, "DEBUG, INFO, WARNING or ERROR")
      ->type_name("{DEBUG,INFO,WARNING,ERROR}");
  app.add_option("--report", options.report, "Write a JSON report of the run to FILE")->type_name("FILE");
  app.add_option("--trace", options.trace,
                 "Write the run's timeline to FILE, in the Trace Event Format that Perfetto and "
                 "chrome://tracing open (default: $NEURON_PARALLEL_COMPILE_TRACE)")
      ->type_name("FILE");
  app.add_option("--max-retries", max_retries,
                 "Retries of a failed compile (default: $NEURON_PARALLEL_COMPILE_MAX_RETRIES, else 0)");
  app.add_option("--compile-timeout", timeout, "Kill a compile that runs longer than SECONDS");
  app.add_option("--lock-timeout", lock_timeout,
                 "A model.hlo_module.pb.lock whose owner is not provably alive is stale past SECONDS "
                 "(default 21600: 6 hours)");
  app.add_option("--memory-per-compile", memory_per_compile,
                 "Expected peak memory of one compile in BYTES, or auto (learned from this cache)");
  app.add_option("--memory-budget", memory_budget,
                 "Memory the compiles may use together, in BYTES (default: MemAvailable)");
  app.add_option("--compiler", options.compiler, "The Neuron compiler (default: $NEURON_CC, else neuronx-cc on PATH)")
      ->type_name("PATH");
  app.add_flag("--dry-run", options.dry_run, "List what would be compiled, compile nothing");

  // Before the split: to find_command_start the hidden option is unknown.
  util::print_bash_completion_if_asked(app, argc, argv, util::AfterOptions::command);
  std::vector<std::string> words(argv + 1, argv + argc);
  bool separator = false;
  size_t split = find_command_start(app, words, separator);
  std::vector<std::string> ours(words.begin(), words.begin() + static_cast<long>(split));
  options.command.assign(words.begin() + static_cast<long>(split) + (separator ? 1 : 0), words.end());

  std::vector<char*> our_argv = {argv[0]};
  for (auto& w : ours) our_argv.push_back(w.data());
  util::parse_command_line(app, static_cast<int>(our_argv.size()), our_argv.data());

  auto found = kModes.find(mode);
  if (found == kModes.end())
    throw UsageError("--command has the bad value '" + mode +
                     "': expected collect-and-compile, collect, compile, check, clean, clear-locks, "
                     "clear-neffs, scan, scan-with-failed or analyze");
  options.mode = found->second;
  if (options.mode == Mode::analyze)
    throw UsageError("--command analyze needs torch-neuronx's graph analyser, which is not part of this tool; "
                     "run it with the neuron_parallel_compile of torch-neuronx");
  // Under srun, the step says which launcher of how many this is, unless
  // the command line does.
  std::string not_a_task;
  options.step = cluster::current_step_task(&not_a_task);
  if (!not_a_task.empty())
    spdlog::warn("{}; this launcher does not tell itself apart from the step's other tasks", not_a_task);
  // Unless told their shares, the step's tasks split the graphs among
  // themselves by their leases (cluster/step_roll.hpp); --static_schedule
  // keeps the original's contiguous shares, by task.
  if (options.step && app.count("--node_id") == 0 && app.count("--world_size") == 0) {
    if (options.static_schedule) {
      options.node_id = options.step->index;
      options.world_size = options.step->count;
    } else {
      options.share_from_step = true;
    }
  }
  if (options.node_id >= options.world_size)
    throw UsageError("--node_id " + std::to_string(options.node_id) + " must be below --world_size " +
                     std::to_string(options.world_size));
  if (!options.trace)
    if (auto env = util::env("NEURON_PARALLEL_COMPILE_TRACE"); env && !env->empty()) options.trace = fs::path(*env);
  if (options.trace && options.trace->empty())
    throw UsageError("--trace has an empty value: name the file to write the run's timeline to");
  // Each task of a step names its own file: all got the same --trace.
  if (options.trace && options.step && options.step->count > 1)
    options.trace = trace_path_for_task(*options.trace, options.step->file_tag());
  std::string retries_text = max_retries;
  const char* retries_source = "--max-retries";
  if (retries_text.empty()) {
    if (auto env = util::env("NEURON_PARALLEL_COMPILE_MAX_RETRIES")) {
      retries_text = *env;
      retries_source = "NEURON_PARALLEL_COMPILE_MAX_RETRIES";
    }
  }
  if (!retries_text.empty()) {
    auto n = util::parse_integer(util::trim(retries_text), 0, 1000);
    if (!n)
      throw UsageError(std::string(retries_source) + " has the bad value '" + retries_text +
                       "': expected a whole number from 0 to 1000");
    options.max_retries = static_cast<int>(*n);
  }
  if (!timeout.empty()) {
    auto s = util::parse_positive_seconds(timeout);
    if (!s)
      throw UsageError("--compile-timeout has the bad value '" + timeout + "': " +
                       std::string(util::kPositiveSecondsExpected));
    options.compile_timeout = *s;
  }
  if (!lock_timeout.empty()) {
    auto s = util::parse_positive_seconds(lock_timeout);
    if (!s)
      throw UsageError("--lock-timeout has the bad value '" + lock_timeout + "': " +
                       std::string(util::kPositiveSecondsExpected));
    // Lock ages are judged in whole seconds, as the compile entry does.
    options.lock_timeout = std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(*s));
  }
  if (util::to_lower(memory_per_compile) != "auto") {
    auto bytes = util::parse_bytes(memory_per_compile);
    if (!bytes || *bytes == 0)
      throw UsageError("--memory-per-compile has the bad value '" + memory_per_compile +
                       "': expected a size in bytes such as 8GB, or auto");
    options.memory_per_compile = *bytes;
  }
  if (!memory_budget.empty()) {
    auto bytes = util::parse_bytes(memory_budget);
    if (!bytes || *bytes == 0)
      throw UsageError("--memory-budget has the bad value '" + memory_budget + "': expected a size in bytes such as 64GB");
    options.memory_budget = *bytes;
  }
  if (options.log_level) {
    util::LogLevel level{};
    if (!util::parse_log_level(*options.log_level, level))
      throw UsageError("--log_level has the bad value '" + *options.log_level +
                       "': expected one of DEBUG, INFO, WARNING, ERROR");
  }
  refuse_unused_outputs(options, mode);
  if (mode_runs_trial(options.mode) && options.command.empty())
    throw UsageError("no command to run: give the training command after the options, e.g. "
                     "neuron_parallel_compile torchrun --nproc_per_node=2 train.py");
  if (!mode_runs_trial(options.mode) && !options.command.empty())
    throw UsageError("--command " + mode + " runs no training command, but one was given: " + options.command.front());
  return options;
}

} // namespace npc::launcher
