// --command clean, clear-locks, clear-neffs, scan, scan-with-failed.

#include <iostream>

#include <spdlog/spdlog.h>

#include <algorithm>

#include <npc/cache/layout.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/launcher/launcher.hpp>
#include <npc/launcher/report.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/cluster/shared_graphs.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>
#include <npc/cache/tiers.hpp>

namespace npc::launcher {

namespace {

std::string current_version(const Options& options, const cache::Cache& cache) {
  fs::path compiler = compile::locate_compiler(options.compiler);
  std::error_code ec;
  fs::path memo = fs::is_directory(cache.private_dir(), ec)
                      ? cache.private_dir() / cache::kCompilerVersionsDir : fs::path();
  return compile::compiler_version(compiler, memo);
}

// Each mode is a phase of the run's trace (--trace), named after it, with
// what it found or did in `args`; one per cache it works on.
class ModeTrace {
public:
  ModeTrace(RunTrace* trace, Mode mode) : trace_(trace), name_(mode_name(mode)) {}
  void phase(const cache::Cache& target, nlohmann::json args) {
    const double now = util::monotonic_seconds();
    if (trace_ == nullptr) return;
    args["cache"] = target.describe();
    trace_->phase(name_, started_, now, std::move(args));
    started_ = now;
  }

private:
  RunTrace* trace_;
  std::string name_;
  double started_ = util::monotonic_seconds();
};

// Counts of the version's entries by state. `name_it` (a shared store behind
// a mirror): the line ends with the cache's name, since the counts are of the
// cache every host shares, not of this host's mirror.
int scan(const cache::Cache& target, const std::string& version, bool failed_apart, bool name_it, ModeTrace& traced) {
  std::size_t done = 0, failed = 0, pending = 0, locked = 0;
  for (const auto& e : target.list_version(version)) {
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
  std::cout << pending << " pending, " << locked << " locked";
  if (name_it) std::cout << " (" << target.describe() << ")";
  std::cout << '\n';
  nlohmann::json counts = {{"version", version}, {"done", done}, {"pending", pending}, {"locked", locked}};
  if (failed_apart) counts["failed"] = failed;
  traced.phase(target, std::move(counts));
  return 0;
}

} // namespace

int run_maintenance(const Options& options, const config::Settings& settings, RunTrace* trace, RunFacts& facts) {
  facts.start_time = util::format_utc(std::chrono::system_clock::now());
  ModeTrace traced(trace, options.mode);
  cache::Tiers tiers(settings);
  cache::Cache& cache = tiers.directory();
  if (options.lock_timeout) cache.set_stale_lock_age(*options.lock_timeout);
  // On a shared cache behind a mirror each mode works on the shared
  // objects, the cache every node sees. clean and clear-neffs also work on
  // this node's mirror: a result left there would be uploaded again by the
  // next launcher run here (shared_graphs.hpp). Other nodes' mirrors are
  // theirs to clean.
  const std::vector<const cache::Cache*> targets = tiers.copies(cluster::kSharedTierConnections);
  const cache::Cache& shared = *targets.front();
  // Which copy a line is about, said when there are two.
  const bool name_copies = tiers.shared();
  auto version = [&] {
    facts.compiler_version = current_version(options, cache);
    return facts.compiler_version;
  };
  switch (options.mode) {
  case Mode::clear_locks: {
    auto report = cache::clear_locks(shared, /*force=*/false);
    for (const auto& p : report.held) std::cout << "kept " << p.string() << ": its owner is running\n";
    std::cout << report.removed.size() << " stale lock files removed";
    if (!report.held.empty()) std::cout << ", " << report.held.size() << " held by running processes kept";
    if (!report.temps.empty()) std::cout << "; " << report.temps.size() << " leftover temp(s) of dead compiles removed";
    if (name_copies) std::cout << " (" << shared.describe() << ")";
    std::cout << '\n';
    traced.phase(shared, {{"removed", report.removed.size()}, {"kept", report.held.size()},
                          {"temps_removed", report.temps.size()}});
    return 0;
  }
  case Mode::scan: return scan(shared, version(), false, name_copies, traced);
  case Mode::scan_with_failed: return scan(shared, version(), true, name_copies, traced);
  case Mode::clean: {
    const std::string v = version();
    // Everything of this version goes, pending graphs too: clean is the user
    // emptying the cache, as the original's does (eviction, which nobody asks
    // for each time, keeps pending graphs). What a compile holds (or any lock
    // file guards) is kept; a launcher running meanwhile reports the queued
    // graphs it loses as removed by another process, not as failures.
    for (const cache::Cache* target : targets) {
      std::size_t removed = 0, busy = 0;
      for (const auto& e : target->list_version(v)) ++(cache::remove_unless_locked(*target, e) ? removed : busy);
      std::cout << "removed " << removed << " entries of neuronxcc-" << v;
      if (busy > 0) std::cout << "; " << busy << " being compiled were kept";
      if (name_copies) std::cout << " (" << target->describe() << ")";
      std::cout << '\n';
      traced.phase(*target, {{"version", v}, {"removed", removed}, {"kept", busy}});
    }
    if (options.workdir) {
      if (auto s = util::remove_tree(*options.workdir); !s) spdlog::warn("{}", s.error());
    }
    return 0;
  }
  case Mode::clear_neffs: {
    const std::string v = version();
    for (const cache::Cache* target : targets) {
      std::size_t cleared = 0;
      for (const auto& e : target->list_version(v)) {
        if (!e.has_neff && !e.has_done && !e.has_log) continue;
        if (cache::forget_result(*target, e)) ++cleared;
      }
      std::cout << "cleared the results of " << cleared << " entries of neuronxcc-" << v
                << "; their graphs stay pending";
      if (name_copies) std::cout << " (" << target->describe() << ")";
      std::cout << '\n';
      traced.phase(*target, {{"version", v}, {"cleared", cleared}});
    }
    return 0;
  }
  default: throw Error("not a maintenance mode", ExitCode::usage);
  }
}

} // namespace npc::launcher
