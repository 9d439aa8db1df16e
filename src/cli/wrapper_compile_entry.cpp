// neuron_cc_wrapper compile-entry: what the launcher's workers run to
// compile one pending entry of the cache (or of an S3 cache's mirror), and
// tell the launcher how it ended (compile/worker_report.hpp).

#include <npc/cli/wrapper_common.hpp>

#include <spdlog/spdlog.h>

#include <npc/cache/eviction.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/cli/cached_compile.hpp>
#include <npc/cli/common.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/compile/target.hpp>
#include <npc/compile/worker_report.hpp>
#include <npc/util/error.hpp>
#include <npc/util/exit_code.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

namespace {

// compile-entry's command line.
struct CompileEntryCommand {
  CommonOptions common;
  fs::path entry_dir;
  bool no_evict = false;
  std::optional<std::string> shared_url;
  std::vector<std::string> cache_words; // NEURON_CC_FLAGS's cache options
  compile::EntryCompileOptions::RunMark run;
};

CompileEntryCommand parse_compile_entry(const std::vector<std::string>& words, std::optional<fs::path>& result_file) {
  util::ArgScanner args(words);
  CompileEntryCommand command;
  std::optional<fs::path> entry_dir;
  bool no_wait = false;
  while (!args.done()) {
    if (take_common(args, command.common)) continue;
    if (auto v = args.take_value("--result-file")) result_file = fs::path(*v);
    else if (auto r = args.take_value("--run")) command.run.run = *r;
    else if (auto by = args.take_value("--run-by")) command.run.by = *by;
    else if (args.take_flag("--last-attempt")) command.run.last_attempt = true;
    else if (auto url = args.take_value("--shared-cache")) command.shared_url = *url;
    else if (args.take_flag("--no-evict")) command.no_evict = true;
    else if (args.take_flag("--no-wait")) no_wait = true;
    else if (args.peek().starts_with("--")) command.cache_words.push_back(args.next());
    else if (!entry_dir) entry_dir = fs::path(args.next());
    else throw UsageError("compile-entry takes one entry directory, got a second: " + args.peek());
  }
  if (command.shared_url) continue_in_s3_build();
  // Whatever its place: --lock-timeout also sets the stale age, which the
  // launcher passes with --no-wait, and must not bring the wait back.
  if (no_wait) command.common.lock_wait = std::chrono::milliseconds(0);
  if (!entry_dir) throw UsageError("compile-entry needs the entry directory");
  command.entry_dir = *entry_dir;
  return command;
}

// compile-entry, telling its outcome through `report` (see worker_report.hpp).
int compile_entry_command(const std::vector<std::string>& words, std::optional<fs::path>& result_file,
                          compile::WorkerReport& report) {
  CompileEntryCommand command = parse_compile_entry(words, result_file);
  const CommonOptions& common = command.common;
  const fs::path& entry_dir = command.entry_dir;
  const std::optional<std::string>& shared_url = command.shared_url;
  const compile::EntryCompileOptions::RunMark& run = command.run;
  const bool no_evict = command.no_evict;
  auto from_command_line = config::split_cache_options(command.cache_words, "command line");
  if (!from_command_line.compiler_flags.empty())
    throw UsageError("compile-entry takes its compiler flags from the entry's compile_flags.json, not '" +
                     from_command_line.compiler_flags.front() + "'");
  Settings settings = load_settings(from_command_line.cache);
  auto key = cache::parse_key(entry_dir.string());
  if (!key) throw UsageError(entry_dir.string() + " is not a cache entry directory (.../neuronxcc-<version>/MODULE_<hash>+<hash>)");
  // The entry's own cache: the directory two levels up.
  fs::path dir = fs::absolute(entry_dir).lexically_normal();
  cache::Tiers cache_tiers(dir.parent_path().parent_path(), shared_url);
  cache::Cache& cache = cache_tiers.directory();
  cache.set_stale_lock_age(common.stale_lock_age);
  std::error_code ec;
  // With a shared tier the mirror may not have the entry yet: the launcher
  // leaves a graph only pending there for its compile to bring.
  if (!shared_url && !fs::is_directory(dir, ec)) {
    // The launcher queued it and someone removed it since: its report says
    // so, and the launcher counts it as removed, not as a failure.
    report.outcome = compile::EntryOutcome::removed;
    spdlog::error("no cache entry at {}", entry_dir.string());
    return static_cast<int>(ExitCode::usage);
  }
  compile::EntryCompileOptions options{compile::locate_compiler(common.compiler), common.timeout,
                                       common.lock_wait, settings.cache.retry_failed_compilation,
                                       settings.cache.compile_workdir, settings.cache.dump_dir, {}, {}, {}, true};
  if (!run.run.empty()) options.run = run;
  // The read-only secondary cache, if one is named, before compiling.
  if (cache::bring_from_secondary(cache, secondary_root(common), *key, common.lock_wait)) {
    report.outcome = compile::EntryOutcome::already_done;
    print_line(stdout, "Already compiled: " + dir.string());
    return 0;
  }
  // A bad NEURON_PLATFORM_TARGET_OVERRIDE is reported before the entry is
  // locked (unreadable flags are compile_entry's to report).
  if (auto flags = cache::read_compile_flags(dir)) std::ignore = compile::target_for(*flags);
  // The mirror's entry of an S3 cache (what the launcher's workers compile
  // there): the shared entry's lock, result and upload too.
  compile::CacheTiers tiers(cache_tiers, compile::CacheTiers::Unusable::fail);
  auto result = tiers.compile(*key, dir, options);
  report = compile::make_worker_report(result);
  switch (result.outcome) {
  case compile::EntryOutcome::cached_failure: return print_cached_failure(cache.entry(dir));
  case compile::EntryOutcome::failed_in_run:
    print_line(stderr, "Failed earlier in this run, not compiled again: " + dir.string() + " (" +
                           result.attempt.exit + "); log " + result.log_path.string());
    return exit_status(ExitCode::failure);
  case compile::EntryOutcome::interrupted: return interrupted_status(result);
  case compile::EntryOutcome::failed: return print_failure(dir, result);
  case compile::EntryOutcome::killed:
  case compile::EntryOutcome::timed_out: return print_killed(dir, result);
  case compile::EntryOutcome::no_space: return print_no_space(dir, result);
  case compile::EntryOutcome::removed: return print_removed(dir);
  case compile::EntryOutcome::already_done:
    print_line(stdout, "Already compiled: " + dir.string());
    return 0;
  case compile::EntryOutcome::locked_elsewhere:
    print_line(stdout, "Locked by another process: " + dir.string());
    return exit_status(ExitCode::locked_elsewhere);
  case compile::EntryOutcome::compiled: break;
  }
  print_line(stdout, "Compiled " + dir.string() + " in " + util::format_seconds(result.attempt.wall_seconds));
  if (!no_evict) cache::evict_after_write(cache, {settings.cache.size_limit(), settings.cache.ttl()});
  return 0;
}

} // namespace

int cmd_compile_entry(const std::vector<std::string>& words) {
  std::optional<fs::path> result_file;
  compile::WorkerReport report;
  auto tell = [&] {
    if (!result_file) return;
    if (auto s = compile::write_worker_report(*result_file, report); !s) spdlog::warn("--result-file: {}", s.error());
  };
  try {
    int status = compile_entry_command(words, result_file, report);
    tell();
    return status;
  } catch (const std::exception& e) {
    report.outcome.reset();
    report.error = e.what();
    tell();
    throw;
  }
}

} // namespace npc::cli
