// --command clean, clear-locks, clear-neffs, scan, scan-with-failed.

#include <iostream>

#include <spdlog/spdlog.h>

#include <algorithm>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/remote_lock.hpp>
#include <npc/compile/remote_entry.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/launcher/launcher.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>

namespace npc::launcher {

namespace {

std::string current_version(const Options& options, const cache::Cache& cache) {
  fs::path compiler = compile::locate_compiler(options.compiler);
  std::error_code ec;
  fs::path memo = fs::is_directory(cache.private_dir(), ec)
                      ? cache.private_dir() / cache::kCompilerVersionsDir : fs::path();
  return compile::compiler_version(compiler, memo);
}

int scan(const cache::Cache& cache, const std::string& version, bool failed_apart) {
  std::size_t done = 0, failed = 0, pending = 0, locked = 0;
  for (const auto& e : cache.list_version(version)) {
    switch (e.state) {
    case cache::EntryState::done: ++done; break;
    case cache::EntryState::failed: ++(failed_apart ? failed : done); break;
    case cache::EntryState::locked: ++locked; break;
    case cache::EntryState::pending: ++pending; break;
    case cache::EntryState::incomplete:
    case cache::EntryState::absent: break;
    }
  }
  std::cout << "neuronxcc-" << version << ": " << done << " done, ";
  if (failed_apart) std::cout << failed << " failed, ";
  std::cout << pending << " pending, " << locked << " locked\n";
  return 0;
}

// The same counts over an S3 cache's objects (the cache every node shares,
// not this node's mirror): 1 LIST for the version folder and 1 per entry,
// and a GET of each lock object to tell a held lock from an expired one.
int scan_remote(const std::string& url, const std::string& version, bool failed_apart) {
  auto storage = compile::open_remote_storage(url);
  const std::string version_dir = std::string(cache::kVersionDirPrefix) + version;
  auto modules = storage->list(version_dir);
  if (!modules) throw EnvironmentError(modules.error());
  auto has = [](const std::vector<std::string>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const auto now = std::chrono::system_clock::now();
  std::size_t done = 0, failed = 0, pending = 0, locked = 0;
  for (const auto& module : *modules) {
    auto key = cache::parse_key(version_dir + "/" + module);
    if (!key) continue;
    const std::string entry = key->relative_path().generic_string();
    auto files = storage->list(entry);
    if (!files) throw EnvironmentError(files.error());
    if (has(*files, cache::kDoneFile)) ++done;
    else if (has(*files, cache::kLogFile)) ++(failed_apart ? failed : done);
    else if (has(*files, cache::kFrameworkLockFile)) {
      auto held = cache::RemoteLock::held(*storage, entry, now);
      if (!held) throw EnvironmentError(held.error());
      ++(*held ? locked : pending);
    }
    else if (has(*files, cache::kGraphFile)) ++pending;
  }
  std::cout << "neuronxcc-" << version << ": " << done << " done, ";
  if (failed_apart) std::cout << failed << " failed, ";
  std::cout << pending << " pending, " << locked << " locked (" << url << ")\n";
  return 0;
}

} // namespace

int run_maintenance(const Options& options, const config::Settings& settings) {
  cache::Cache cache(settings.cache_root);
  if (options.lock_timeout) cache.set_stale_lock_age(*options.lock_timeout);
  if (settings.remote_cache) {
    // Only the scans work on an S3 cache so far; the program refuses the rest.
    const bool failed_apart = options.mode == Mode::scan_with_failed;
    if (options.mode != Mode::scan && !failed_apart) throw Error("not a mode for an S3 cache", ExitCode::usage);
    return scan_remote(*settings.remote_cache, current_version(options, cache), failed_apart);
  }
  switch (options.mode) {
  case Mode::clear_locks: {
    auto report = cache::clear_locks(cache, /*force=*/false);
    for (const auto& p : report.held) std::cout << "kept " << p.string() << ": its owner is running\n";
    std::cout << report.removed.size() << " stale lock files removed";
    if (!report.held.empty()) std::cout << ", " << report.held.size() << " held by running processes kept";
    if (!report.temps.empty()) std::cout << "; " << report.temps.size() << " leftover temp(s) of dead compiles removed";
    std::cout << '\n';
    return 0;
  }
  case Mode::scan: return scan(cache, current_version(options, cache), false);
  case Mode::scan_with_failed: return scan(cache, current_version(options, cache), true);
  case Mode::clean: {
    std::string version = current_version(options, cache);
    std::size_t removed = 0, busy = 0;
    // Everything of this version goes, pending graphs too: clean is the user
    // emptying the cache, as the original's does (eviction, which nobody asks
    // for each time, keeps pending graphs). What a compile holds (or any lock
    // file guards) is kept; a launcher running meanwhile reports the queued
    // graphs it loses as removed by another process, not as failures.
    for (const auto& e : cache.list_version(version)) {
      auto r = cache.entry(e.dir).remove();
      if (!r) throw EnvironmentError(r.error());
      ++(*r ? removed : busy);
    }
    if (options.workdir) {
      if (auto s = util::remove_tree(*options.workdir); !s) spdlog::warn("{}", s.error());
    }
    std::cout << "removed " << removed << " entries of neuronxcc-" << version;
    if (busy > 0) std::cout << "; " << busy << " being compiled were kept";
    std::cout << '\n';
    return 0;
  }
  case Mode::clear_neffs: {
    std::string version = current_version(options, cache);
    std::size_t cleared = 0;
    for (const auto& e : cache.list_version(version)) {
      if (!e.has_neff && !e.has_done && !e.has_log) continue;
      auto lock = cache.entry(e.dir).try_lock();
      if (!lock || !lock->has_value()) continue;
      if (const cache::Entry entry = cache.entry(e.dir); entry.demote() && entry.clear_failure()) ++cleared;
    }
    std::cout << "cleared the results of " << cleared << " entries of neuronxcc-" << version
              << "; their graphs stay pending\n";
    return 0;
  }
  default: throw Error("not a maintenance mode", ExitCode::usage);
  }
}

} // namespace npc::launcher
