#include <npc/cli/wrapper_common.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/secondary.hpp>
#include <npc/util/error.hpp>
#include <npc/util/exit_code.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

namespace {

const char* g_s3_build = nullptr;
char** g_argv = nullptr;

std::chrono::milliseconds parse_seconds(const std::string& option, const std::string& value) {
  auto timeout = util::parse_positive_seconds(value);
  if (!timeout)
    throw UsageError(option + " has the bad value '" + value + "': " + std::string(util::kPositiveSecondsExpected));
  return *timeout;
}

} // namespace

void print_text(std::FILE* stream, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

void print_line(std::FILE* stream, const std::string& line) { print_text(stream, line + "\n"); }

void continue_in_s3_build() {
  if (g_s3_build == nullptr) return;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw EnvironmentError("cannot find this program's own path in /proc/self/exe: " + ec.message());
  std::string s3_build = (self.parent_path() / g_s3_build).lexically_normal().string();
  std::fflush(nullptr); // what stdio holds would be lost with this image
  g_argv[0] = s3_build.data();
  ::execv(s3_build.c_str(), g_argv);
  throw EnvironmentError("an s3:// cache needs " + s3_build + " (neuron_cc_wrapper built with S3 support), which " +
                         "cannot be run: " + std::strerror(errno) + "; reinstall neuron-parallel-compile");
}

bool take_common(util::ArgScanner& args, CommonOptions& common) {
  if (auto v = args.take_value("--compiler")) {
    common.compiler = *v;
    return true;
  }
  if (auto v = args.take_value("--timeout")) {
    common.timeout = parse_seconds("--timeout", *v);
    return true;
  }
  if (auto v = args.take_value("--lock-timeout")) {
    common.lock_wait = parse_seconds("--lock-timeout", *v);
    common.stale_lock_age = std::max(std::chrono::seconds(1),
                                     std::chrono::duration_cast<std::chrono::seconds>(common.lock_wait));
    return true;
  }
  if (auto v = args.take_value("--secondary-cache")) {
    common.secondary_cache = *v;
    return true;
  }
  return false;
}

void remember_program(char** argv, const char* s3_build) {
  g_argv = argv;
  g_s3_build = s3_build;
}

void set_s3_build_words(char** argv) { g_argv = argv; }

std::optional<fs::path> secondary_root(const CommonOptions& common) {
  return common.secondary_cache ? cache::resolve_secondary_root(*common.secondary_cache)
                                : cache::secondary_root_from_environment();
}

// The stdout line is torch-neuronx's own, which scripts look for; the error
// on stderr says what to do, where a failing exit status sends people.
int print_cached_failure(const cache::Entry& entry) {
  print_line(stdout, "Got a cached failed neff at " + entry.log_path().string() +
                         ". Will skip compilation, please set --retry_failed_compilation");
  spdlog::error("this graph failed to compile earlier and the failure is cached ({}); to compile it again, add "
                "--retry_failed_compilation to NEURON_CC_FLAGS or run neuron_cache clear-failed",
                entry.log_path().string());
  return static_cast<int>(ExitCode::failure);
}

int print_failure(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  spdlog::error("{}", compile::describe_failure(entry_dir, result.attempt.exit, result.log_path));
  return static_cast<int>(ExitCode::failure);
}

// A kill is reported like a failure but says it was not cached: the entry
// stays pending for the next run.
int print_killed(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  std::string how = result.attempt.exit;
  if (result.outcome == compile::EntryOutcome::killed) how += " (as the kernel's out-of-memory killer does)";
  how += "; not cached as a failure: the next run compiles it again";
  spdlog::error("{}", compile::describe_failure(entry_dir, how, result.log_path));
  return static_cast<int>(ExitCode::failure);
}

// Out of space: the entry stays pending; the message names the full place.
int print_no_space(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  spdlog::error("compilation of {} stopped: {}", entry_dir.string(), result.attempt.exit);
  return static_cast<int>(ExitCode::environment);
}

// The entry went while it compiled or while its lock was waited for
// (neuron_cache rm, --command clean, an eviction pass).
int print_removed(const fs::path& entry_dir) {
  spdlog::error("the cache entry {} was removed by another process before it was compiled here; nothing was "
                "cached (run again to compile it)", entry_dir.string());
  return static_cast<int>(ExitCode::environment);
}

int interrupted_status(const compile::EntryCompileResult& result) {
  return exit_status_for_signal(result.run ? result.run->interrupted_by : SIGINT);
}

std::FILE* message_stream(const fs::path& output) {
  return util::same_file_as_stdout(output) ? stderr : stdout;
}

void print_cached_neff(const cache::Entry& entry, const fs::path& output) {
  print_line(message_stream(output),
             "Using a cached neff at " + entry.neff_path().string() + ". Exiting with a successfully compiled graph.");
}

int tell_end(const CachedCompileEnd& end, const cache::Entry& entry, const fs::path& output) {
  if (end.served) {
    print_cached_neff(*end.served, output);
    return 0;
  }
  const compile::EntryCompileResult& result = end.result;
  const fs::path& entry_dir = entry.dir();
  switch (result.outcome) {
  case compile::EntryOutcome::cached_failure: return print_cached_failure(entry);
  case compile::EntryOutcome::interrupted: return interrupted_status(result);
  case compile::EntryOutcome::failed: return print_failure(entry_dir, result);
  case compile::EntryOutcome::killed:
  case compile::EntryOutcome::timed_out: return print_killed(entry_dir, result);
  case compile::EntryOutcome::no_space: return print_no_space(entry_dir, result);
  case compile::EntryOutcome::removed: return print_removed(entry_dir);
  case compile::EntryOutcome::compiled:
    print_line(message_stream(output),
               "Compiled " + entry_dir.string() + " in " + util::format_seconds(result.attempt.wall_seconds));
    return 0;
  case compile::EntryOutcome::already_done: print_cached_neff(entry, output); return 0;
  case compile::EntryOutcome::failed_in_run:   // compile-entry's alone (--run)
  case compile::EntryOutcome::locked_elsewhere: break; // we waited: never reached
  }
  throw EnvironmentError("the compile of " + entry_dir.string() + " came back without a result");
}

} // namespace npc::cli
