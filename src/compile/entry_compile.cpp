#include <npc/compile/entry_compile.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/leftover_temps.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

using cache::kCompileNeffPrefix;
using cache::kCompileWorkPrefix;

cache::AttemptRecord make_attempt(const cache::EntryMeta& before, const CompileRun& run,
                                  std::time_t started) {
  cache::AttemptRecord attempt;
  attempt.attempt = static_cast<int>(before.attempts.size()) + 1;
  attempt.outcome = run.timed_out             ? "timeout"
                    : run.interrupted_by != 0 ? "interrupted"
                    : run.status.success()    ? "success"
                                              : "failed";
  attempt.exit = run.describe();
  attempt.exit_code = run.status.signaled ? 0 : run.status.code;
  attempt.signal = run.status.signaled ? util::signal_name(run.status.signal) : "";
  attempt.wall_seconds = run.wall_seconds;
  attempt.peak_rss_bytes = run.status.peak_rss_bytes;
  attempt.started_unix = started;
  return attempt;
}

// --dump: a copy of the compile's working directory, replacing an older one.
void keep_artifacts(const fs::path& workdir, const fs::path& target) {
  std::error_code ec;
  std::ignore = util::remove_tree(target);
  fs::create_directories(target, ec);
  if (!ec) fs::copy(workdir, target, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) spdlog::warn("--dump: cannot keep the compiler's artifacts in {}: {}", target.string(), ec.message());
}

std::uint64_t file_size_or_zero(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

// The entry's directory is gone: removed (renamed into the trash) by
// neuron_cache rm or --command clean since the caller chose it.
bool entry_gone(const fs::path& entry_dir) {
  struct stat st {};
  return ::lstat(entry_dir.c_str(), &st) != 0 && errno == ENOENT;
}

std::optional<std::uint64_t> free_bytes(const fs::path& path) {
  struct statvfs info {};
  if (::statvfs(path.c_str(), &info) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
}

// After a result could not be published into the entry: what clears an
// entry that fails that way on every run (a folder where model.neff belongs,
// a file made read-only).
std::string damaged_entry_hint(const fs::path& entry_dir) {
  const fs::path version_dir = entry_dir.parent_path();
  return " (if the entry is damaged, `neuron_cache --cache_dir " + version_dir.parent_path().string() + " rm " +
         (version_dir.filename() / entry_dir.filename()).string() +
         "` removes it and the next run compiles the graph again)";
}

std::string log_tail_text(const fs::path& log) {
  std::string text;
  for (const auto& line : util::tail_lines(log, 50)) text += line + "\n";
  return text;
}

} // namespace

std::optional<SpaceFault> find_space_fault(const std::vector<fs::path>& places, std::string_view said) {
  bool reported = said.find(std::strerror(ENOSPC)) != std::string_view::npos ||
                  said.find(std::strerror(EDQUOT)) != std::string_view::npos;
  for (const auto& place : places) {
    auto free = free_bytes(place);
    if (free && *free < kNearlyFullBytes) return SpaceFault{place, free};
  }
  if (reported && !places.empty()) return SpaceFault{places.front(), free_bytes(places.front())};
  return std::nullopt;
}

std::string describe_space_fault(const SpaceFault& fault) {
  const std::string then = "; free space and run again: the graph stays pending, no failure is cached";
  if (fault.free_bytes && *fault.free_bytes >= kNearlyFullBytes)
    // Reported, but this filesystem has room now: the full one was another
    // (the compiler's temporary directory, say) or was freed since.
    return std::string(std::strerror(ENOSPC)) + " was reported during the compile (the filesystem of " +
           fault.where.string() + " has " + std::to_string(*fault.free_bytes) +
           " bytes free now; the compiler's temporary directory, TMPDIR, may be the full one)" + then;
  std::string free = fault.free_bytes ? std::to_string(*fault.free_bytes) + " bytes free" : "free space unknown";
  return std::string(std::strerror(ENOSPC)) + ": the filesystem of " + fault.where.string() + " is full (" + free +
         ")" + then;
}

std::string describe_failure(const fs::path& entry_dir, const std::string& how,
                             const fs::path& log_path, std::size_t tail_lines) {
  std::string text = "compilation of " + entry_dir.string() + " failed: compiler " + how +
                     "; full log: " + log_path.string();
  auto tail = util::tail_lines(log_path, tail_lines);
  if (!tail.empty()) {
    text += "\nlast lines of the log:";
    for (const auto& line : tail) text += "\n  | " + line;
  }
  return text;
}

std::string_view to_string(EntryOutcome outcome) {
  switch (outcome) {
  case EntryOutcome::compiled: return "compiled";
  case EntryOutcome::already_done: return "already_done";
  case EntryOutcome::cached_failure: return "cached_failure";
  case EntryOutcome::failed: return "failed";
  case EntryOutcome::interrupted: return "interrupted";
  case EntryOutcome::killed: return "killed";
  case EntryOutcome::timed_out: return "timed_out";
  case EntryOutcome::locked_elsewhere: return "locked_elsewhere";
  case EntryOutcome::removed: return "removed";
  case EntryOutcome::no_space: return "no_space";
  case EntryOutcome::failed_in_run: return "failed_in_run";
  }
  return "?";
}

std::optional<EntryOutcome> parse_entry_outcome(std::string_view text) {
  for (auto outcome : {EntryOutcome::compiled, EntryOutcome::already_done, EntryOutcome::cached_failure,
                       EntryOutcome::failed, EntryOutcome::interrupted, EntryOutcome::killed,
                       EntryOutcome::timed_out, EntryOutcome::locked_elsewhere, EntryOutcome::removed,
                       EntryOutcome::no_space, EntryOutcome::failed_in_run})
    if (to_string(outcome) == text) return outcome;
  return std::nullopt;
}

cache::UsageCounts usage_of(const EntryCompileResult& result, const fs::path& entry_dir) {
  cache::UsageCounts counts;
  switch (result.outcome) {
  case EntryOutcome::compiled:
    counts.misses = 1;
    counts.compile_seconds = result.attempt.wall_seconds;
    break;
  case EntryOutcome::already_done: return cache::hit_of(entry_dir);
  case EntryOutcome::failed:
  case EntryOutcome::killed:
  case EntryOutcome::timed_out:
  case EntryOutcome::no_space:
    counts.failed = 1;
    counts.compile_seconds = result.attempt.wall_seconds;
    break;
  case EntryOutcome::cached_failure:
  case EntryOutcome::failed_in_run: counts.failed = 1; break;
  case EntryOutcome::interrupted:
  case EntryOutcome::removed:
  case EntryOutcome::locked_elsewhere: break; // nothing served, nothing learned
  }
  return counts;
}

EntryCompileResult compile_entry(const cache::Cache& cache, const fs::path& entry_dir,
                                 const EntryCompileOptions& options) {
  EntryCompileResult result;
  const cache::Entry entry = cache.entry(entry_dir);
  auto removed = [&] {
    result.outcome = EntryOutcome::removed;
    return result;
  };
  if (entry_gone(entry_dir)) return removed();
  auto taken = entry.lock(
      options.lock_wait,
      [&](const std::string& holder) {
        spdlog::info("waiting for {} to finish compiling {}", holder, entry_dir.string());
      },
      cache::Entry::EntryDir::must_exist);
  if (!taken) {
    if (entry_gone(entry_dir)) return removed(); // while we waited for its lock
    throw EnvironmentError(taken.error());
  }
  // Gone while we waited for its lock, whether or not another process has
  // stored its graph again since.
  if (std::holds_alternative<cache::EntryGone>(*taken)) return removed();
  if (auto* busy = std::get_if<cache::LockBusy>(&*taken)) {
    if (options.lock_wait.count() == 0) {
      result.outcome = EntryOutcome::locked_elsewhere;
      return result;
    }
    throw EnvironmentError(cache::describe_busy(entry_dir, *busy));
  }
  storage::Lock lock = std::move(std::get<storage::Lock>(*taken));

  auto info = entry.inspect();
  if (!info) throw EnvironmentError(info.error());
  if (info->state == cache::EntryState::absent || (!info->has_graph && entry_gone(entry_dir))) return removed();
  // We hold the lock: a work folder left in the entry is of a compile that
  // died, and may hold gigabytes of artifacts.
  for (const auto& temp : cache::remove_dead_temps(entry_dir, info->temp_files, cache::LockHeld::yes,
                                                   std::chrono::system_clock::now()))
    if (!temp.error.empty()) spdlog::warn("{}", temp.error);
  if (info->state == cache::EntryState::done) {
    auto integrity = entry.verify_neff();
    if (integrity && *integrity != cache::Integrity::mismatch) {
      if (options.while_done_and_locked) options.while_done_and_locked(entry);
      result.outcome = EntryOutcome::already_done;
      return result;
    }
    spdlog::warn("{}: the cached NEFF does not match its integrity record; compiling it again",
                 entry_dir.string());
    if (auto s = entry.demote(); !s) throw EnvironmentError(s.error());
  }
  // Read under the lock: the attempts so far, and whether another launcher
  // of this run already failed the graph for good. That launcher wrote its
  // record before it let the lock go, so no launcher of the run that takes
  // the lock after it misses the record.
  auto meta = cache::read_entry_meta(entry_dir);
  const cache::EntryMeta before = meta ? *meta : cache::EntryMeta{};
  if (options.run)
    if (const cache::AttemptRecord* failed = before.failed_for_good_in(options.run->run)) {
      result.outcome = EntryOutcome::failed_in_run;
      result.attempt = *failed;
      result.attempt.wall_seconds = 0; // nothing ran here
      result.attempt.exit = cache::describe_run_failure(*failed);
      result.log_path = info->has_log ? entry.log_path() : entry.killed_log_path();
      return result;
    }
  // Not `state == failed`: we hold the lock, so the entry reads as locked.
  if (info->has_log && !info->has_done && !options.retry_failed) {
    result.outcome = EntryOutcome::cached_failure;
    result.log_path = entry.log_path();
    return result;
  }
  if (!info->has_graph && options.store_missing_graph) {
    options.store_missing_graph(entry);
    info = entry.inspect();
    if (!info) throw EnvironmentError(info.error());
  }
  if (!info->has_graph)
    throw Error("cache entry " + entry_dir.string() + " has no " + entry.graph_path().filename().string() +
                " to compile (remove it with neuron_cache rm)", ExitCode::environment);
  // From here on, a failure to read or create in the entry may only mean
  // that it went after we looked (eviction, clean): then it was removed.
  auto flags = cache::read_compile_flags(entry_dir);
  if (!flags) {
    if (entry_gone(entry_dir)) return removed();
    throw EnvironmentError(flags.error() + " (remove the entry with neuron_cache rm)");
  }

  // Inside the entry by default: same filesystem, so publishing is a rename;
  // and a name eviction recognises as a temp if we die here.
  fs::path work_parent = entry_dir;
  if (options.compile_workdir) {
    work_parent = *options.compile_workdir;
    if (auto s = util::ensure_dir(work_parent); !s) throw EnvironmentError("--compile_workdir: " + s.error());
  }
  std::optional<util::TempDir> made;
  try {
    made.emplace(work_parent, kCompileWorkPrefix);
  } catch (const EnvironmentError&) {
    if (entry_gone(entry_dir)) return removed();
    throw;
  }
  const util::TempDir& workdir = *made;
  CompileJob job;
  job.compiler = options.compiler;
  job.graph = entry.graph_path();
  job.output_neff = workdir.path() / cache::kNeffFile;
  job.flags = *flags;
  job.working_dir = workdir.path();
  job.log_file = workdir.path() / cache::kLogFile;
  job.timeout = options.timeout;
  if (options.adjust_job) options.adjust_job(job);
  std::time_t started = std::time(nullptr);
  // The compiler starts in the work folder: gone with the entry, it cannot.
  std::optional<CompileRun> ran;
  try {
    ran.emplace(run_compiler(job));
  } catch (const EnvironmentError&) {
    if (entry_gone(entry_dir)) return removed();
    throw;
  }
  CompileRun& run = *ran;
  result.attempt = make_attempt(before, run, started);
  if (options.run) {
    result.attempt.run = options.run->run;
    result.attempt.by = options.run->by;
    result.attempt.last = options.run->last_attempt;
  }
  result.attempt.flags_from = options.flags_from;
  if (options.dump_dir) keep_artifacts(workdir.path(), *options.dump_dir / entry_dir.filename());
  if (options.compile_workdir && file_size_or_zero(job.output_neff) > 0) {
    // Published by rename, so it must first be on the entry's filesystem.
    fs::path local = entry_dir / (std::string(kCompileNeffPrefix) + std::to_string(::getpid()));
    std::error_code ec;
    fs::copy_file(job.output_neff, local, fs::copy_options::overwrite_existing, ec);
    if (ec) throw EnvironmentError("cannot copy the NEFF from --compile_workdir into " + entry_dir.string() + ": " + ec.message());
    job.output_neff = local;
  }

  if (run.interrupted_by != 0) {
    result.outcome = EntryOutcome::interrupted;
    result.run = std::move(run);
    return result; // the entry stays pending; nothing is cached
  }
  // Removed while it compiled (our workdir went with it into the trash):
  // nothing to publish into, and publishing would bring back half an entry.
  if (entry_gone(entry_dir)) {
    result.run = std::move(run);
    return removed();
  }
  // Where a compile can run out of space: the entry's filesystem (graph,
  // log, NEFF, record) and the working directory's, when it is elsewhere.
  std::vector<fs::path> space_places = {entry_dir};
  if (options.compile_workdir) space_places.push_back(workdir.path());
  // Out of space is the machine's fault, not the graph's: the attempt is
  // recorded, its log kept as npc-killed.log, the entry left pending.
  auto left_pending_for_space = [&](const SpaceFault& fault) {
    result.attempt.outcome = "no_space";
    result.attempt.exit = describe_space_fault(fault);
    // What this attempt wrote goes first: the record needs a little room.
    std::ignore = ::unlink(job.output_neff.c_str());
    if (entry.record_killed(job.log_file, result.attempt)) result.log_path = entry.killed_log_path();
    result.outcome = EntryOutcome::no_space;
    result.run = std::move(run);
    return result;
  };
  bool wrote_neff = file_size_or_zero(job.output_neff) > 0;
  if (run.success() && wrote_neff) {
    if (auto s = entry.publish_success(job.output_neff, result.attempt); !s) {
      if (entry_gone(entry_dir)) return removed();
      if (auto fault = find_space_fault(space_places, s.error())) return left_pending_for_space(*fault);
      throw EnvironmentError(s.error() + damaged_entry_hint(entry_dir));
    }
    if (options.while_done_and_locked) options.while_done_and_locked(entry);
    result.outcome = EntryOutcome::compiled;
    result.run = std::move(run);
    return result;
  }
  if (run.success()) {
    result.attempt.outcome = "failed";
    result.attempt.exit = "exit code 0 but no NEFF written";
  }
  if (!options.cache_failures) {
    result.outcome = EntryOutcome::failed;
    result.run = std::move(run);
    return result; // pending, as before the compile
  }
  std::string note = "\n[neuron_cc_wrapper] command: " + util::join_shell_words(run.argv) +
                     "\n[neuron_cc_wrapper] compiler " + result.attempt.exit + " (wall time " +
                     util::format_seconds(run.wall_seconds) + ")\n";
  auto noted = util::append_line(job.log_file, note);
  // Killed from outside or by our timeout says nothing about the graph (the
  // host ran out of memory, the machine was loaded): caching it as a failure
  // would refuse the graph in every later run.
  if (run.timed_out || (run.status.signaled && run.status.signal == SIGKILL)) {
    if (auto s = entry.record_killed(job.log_file, result.attempt); !s)
      throw EnvironmentError(s.error());
    result.outcome = run.timed_out ? EntryOutcome::timed_out : EntryOutcome::killed;
    result.log_path = entry.killed_log_path();
    result.run = std::move(run);
    return result;
  }
  // A compiler that could not write its NEFF or its log for want of space
  // failed because of the machine; its log may not even say so (it was on
  // the full filesystem).
  std::string said = log_tail_text(job.log_file) + (noted ? "" : noted.error());
  if (auto fault = find_space_fault(space_places, said)) return left_pending_for_space(*fault);
  if (auto s = entry.publish_failure(job.log_file, result.attempt); !s) {
    if (entry_gone(entry_dir)) return removed();
    if (auto fault = find_space_fault(space_places, s.error())) return left_pending_for_space(*fault);
    throw EnvironmentError(s.error() + damaged_entry_hint(entry_dir));
  }
  result.outcome = EntryOutcome::failed;
  result.log_path = entry.log_path();
  result.run = std::move(run);
  return result;
}

} // namespace npc::compile
