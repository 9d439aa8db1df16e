#include "framework_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "cache_key.h"
#include "entry_files.h"
#include "entry_lock.h"
#include "env.h"
#include "error.h"
#include "files.h"
#include "json_text.h"

namespace standin::train {
namespace {

constexpr char kExtractOnlyEnv[] = "NEURON_EXTRACT_GRAPHS_ONLY";
constexpr char kPathLogEnv[] = "NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG";
constexpr char kLockWaitEnv[] = "STANDIN_TRAIN_LOCK_WAIT_S";
constexpr double kDefaultLockWaitS = 3600;
// Longer than any test or run; keeps the deadline arithmetic from overflowing.
constexpr double kMaxLockWaitS = 1e9;
// Nothing exited, but the graph counts as failed (a cached failure).
constexpr int kCachedFailureStatus = 1;

constexpr char kGraphFile[] = "model.hlo_module.pb";
constexpr char kFlagsFile[] = "compile_flags.json";
constexpr char kNeffFile[] = "model.neff";
constexpr char kDoneFile[] = "model.done";
constexpr char kLogFile[] = "model.log";
constexpr char kLockFile[] = "model.hlo_module.pb.lock";

std::string in_entry(const std::string& entry, const char* name) { return entry + "/" + name; }

bool is_done(const std::string& entry) {
  return path_exists(in_entry(entry, kDoneFile)) && path_exists(in_entry(entry, kNeffFile));
}

// Printed as the framework logs it, and kept in the result; one write keeps
// the line whole on a stdout shared by several ranks.
void say(CompileResult& result, const std::string& text) {
  write_all(STDOUT_FILENO, text);
  result.output += text;
}

}  // namespace

FrameworkCache::FrameworkCache(const std::optional<std::string>& script_cache_dir, CacheLayout layout)
    : flags_(parse_framework_flags(effective_neuron_cc_flags(script_cache_dir))),
      root_(layout == CacheLayout::kOlderReleases ? resolve_older_releases_cache_root(flags_)
                                                  : resolve_cache_root(flags_)),
      compiler_(NeuronxCompiler::locate()),
      extract_only_(env_truthy(kExtractOnlyEnv)),
      // Older releases told the launcher nothing beyond the extraction lines.
      path_log_(layout == CacheLayout::kOlderReleases ? std::nullopt : env_string(kPathLogEnv)),
      lock_wait_s_(env_double(kLockWaitEnv, kDefaultLockWaitS)) {}

CompileResult FrameworkCache::compile(const std::string& graph_path, const std::string& neff_path) {
  const auto start = std::chrono::steady_clock::now();
  const std::string graph = read_file(graph_path, "graph");
  const std::string entry = entry_directory(root_, compiler_.version(), graph, flags_.compiler_flags);
  CompileResult result;
  if (extract_only_) {
    extract(graph, entry, neff_path, result);
  } else {
    compile_just_in_time(graph, entry, neff_path, result);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void FrameworkCache::extract(const std::string& graph, const std::string& entry,
                             const std::string& neff_path, CompileResult& result) const {
  if (is_done(entry)) {
    use_cached_neff(entry, neff_path, result);
  } else {
    write_inputs(graph, entry);
    say(result, "Extracting graphs (" + in_entry(entry, kGraphFile) +
                    ") for ahead-of-time parallel compilation. No compilation was done.\n");
  }
  // The launcher cannot know a root the script chose inside Python: the
  // framework tells it here. One URL, the whole file, replaced each time.
  if (path_log_) publish_file(*path_log_, root_, IfPresent::kReplace, "cache path log");
}

void FrameworkCache::compile_just_in_time(const std::string& graph, const std::string& entry,
                                          const std::string& neff_path, CompileResult& result) const {
  const std::string lock_path = in_entry(entry, kLockFile);
  const std::string log_path = in_entry(entry, kLogFile);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::min(lock_wait_s_, kMaxLockWaitS)));
  bool announced_wait = false;
  for (;;) {
    if (is_done(entry)) {
      use_cached_neff(entry, neff_path, result);
      return;
    }
    if (path_exists(log_path) && !flags_.retry_failed_compilation) {
      say(result, "Got a cached failed neff at " + log_path +
                      ". Will skip compilation, please set --retry_failed_compilation\n");
      result.exit_status = kCachedFailureStatus;
      result.failure = "cached failure in " + log_path;
      return;
    }
    if (!path_exists(lock_path)) {
      create_directories(entry);
      if (std::optional<EntryLock> lock = EntryLock::try_acquire(lock_path)) {
        // Another process may have published (or failed) the entry between
        // our checks and our lock: look again before compiling twice.
        if (is_done(entry) || (path_exists(log_path) && !flags_.retry_failed_compilation)) continue;
        compile_holding_lock(graph, entry, neff_path, result);
        return;
      }
    }
    if (!announced_wait) {
      say(result, "Another process must be compiling " + entry + ", waiting...\n");
      announced_wait = true;
    }
    wait_until_gone(lock_path, deadline, lock_wait_s_);
  }
}

void FrameworkCache::compile_holding_lock(const std::string& graph, const std::string& entry,
                                          const std::string& neff_path, CompileResult& result) const {
  write_inputs(graph, entry);
  const std::string neff = in_entry(entry, kNeffFile);
  // The compiler writes a temporary name; model.neff appears only complete.
  const std::string temporary_neff = temporary_path_for(neff) + ".neff";
  const CapturedRun run = compiler_.compile(in_entry(entry, kGraphFile), temporary_neff, flags_.compiler_flags);
  say(result, run.output);
  result.exit_status = run.exit_status;
  if (run.exit_status != 0) {
    // A compiler that died writing (disk full) may leave part of a NEFF.
    ::unlink(temporary_neff.c_str());
    publish_file(in_entry(entry, kLogFile), run.output, IfPresent::kReplace, "compile log");
    return;
  }
  rename_file(temporary_neff, neff, "NEFF");
  // A retried compile that now succeeded: the old failure no longer holds.
  ::unlink(in_entry(entry, kLogFile).c_str());
  // Written last: with model.neff it says the entry is complete.
  publish_file(in_entry(entry, kDoneFile), "", IfPresent::kReplace, "done marker");
  copy_file_over(neff, neff_path);
}

void FrameworkCache::use_cached_neff(const std::string& entry, const std::string& neff_path,
                                     CompileResult& result) const {
  const std::string neff = in_entry(entry, kNeffFile);
  say(result, "Using a cached neff at " + neff + ". Exiting with a successfully compiled graph.\n");
  copy_file_over(neff, neff_path);
  result.cache_hit = true;
}

void FrameworkCache::write_inputs(const std::string& graph, const std::string& entry) const {
  create_directories(entry);
  publish_file(in_entry(entry, kGraphFile), graph, IfPresent::kKeep, "graph");
  publish_file(in_entry(entry, kFlagsFile), json_string_list(flags_.compiler_flags), IfPresent::kKeep,
               "compiler flags");
}

}  // namespace standin::train
