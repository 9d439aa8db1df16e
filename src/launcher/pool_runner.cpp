#include <npc/launcher/pool_runner.hpp>

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/launcher/held_summary.hpp>
#include <npc/launcher/pool_progress.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/process.hpp>
#include <npc/util/strings.hpp>

// The event loop over a Pool (pool_runner.hpp). Each tick, in this order:
// follow the roll's changes (the shares), say what is waited for, look again
// at the graphs due a look (here, then in the cache other hosts share), leave
// to their holders the graphs that cannot be waited for, pick and start
// what the pool allows (each graph's lock taken beside the loop first), then
// wait for workers to end or a signal.

namespace npc::launcher {

using cluster::Cluster;
using cluster::HeldEntryLook;

namespace {

// Whether a locked entry's holder proves itself alive: a live process of
// this host (owner facts), or a record its holder keeps renewing, on this
// host or another that shares the directory. Such a holder is waited for: it
// ends with a result, or stops renewing (it died with its host) and its lock
// lapses within the lock's time to live, and the graph is compiled here. The
// framework's lock carries no owner facts: such an entry is left to its
// holder once nothing else is left to do, not waited for until the lock
// turns stale hours later.
enum class Holder { none, alive_here, renewing_elsewhere };
Holder holder_proves_alive(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.entry(entry_dir).inspect();
  if (!info || info->state != cache::EntryState::locked) return Holder::none;
  if (info->framework_lock.state == storage::LockState::held_alive) return Holder::alive_here;
  return info->framework_lock.owner_proved_alive() ? Holder::renewing_elsewhere : Holder::none;
}

bool locked_in_mirror(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.entry(entry_dir).inspect();
  return info && info->state == cache::EntryState::locked;
}

// With entries beyond this host's directory (Cluster::entries_elsewhere: a
// shared tier), an entry missing from the mirror is pending: its graph, left
// there until its compile, is the shared tier's to have or not (a worker
// that finds none reports the graph removed).
// `lease_ends`: when the lock found ends unless renewed, when its record
// says (ours; not the framework's).
Pool::Found look_at(const cache::Cache& cache, const Cluster& cluster, const fs::path& entry_dir,
                    bool* lock_blocks = nullptr, std::optional<storage::Time>* lease_ends = nullptr) {
  auto info = cache.entry(entry_dir).inspect();
  if (lock_blocks) *lock_blocks = info && info->state == cache::EntryState::locked && info->framework_lock.blocks();
  if (lease_ends && info && info->state == cache::EntryState::locked && info->framework_lock.record &&
      info->framework_lock.record->expires_unix > 0)
    *lease_ends = storage::Time(std::chrono::seconds(info->framework_lock.record->expires_unix));
  if (!info) return Pool::Found::failed;
  switch (info->state) {
  case cache::EntryState::done: return Pool::Found::done;
  case cache::EntryState::locked: return Pool::Found::locked;
  case cache::EntryState::failed: return Pool::Found::failed;
  case cache::EntryState::absent: return cluster.entries_elsewhere() ? Pool::Found::pending : Pool::Found::removed;
  default: return Pool::Found::pending;
  }
}

// Who failed a graph found failed, and how, when its record says another
// launcher of this run failed it for good; empty otherwise (a failure
// cached before the run, or by a process outside it).
std::string failed_in_run(const cache::Cache& cache, const RunnerConfig& config, const fs::path& entry_dir) {
  if (config.run.empty()) return {};
  auto meta = cache::read_entry_meta(cache.entry(entry_dir).dir());
  if (!meta) return {};
  const cache::AttemptRecord* failed = meta->failed_for_good_in(config.run);
  return failed ? cache::describe_run_failure(*failed) : std::string();
}

// Who holds item i's graph in this host's cache, for the lines that say
// so; nothing when no lock there holds it (let go since, or another host's
// in a shared cache, which run.cpp names as it brings the graph).
std::optional<HeldGraph> held_graph(const cache::Cache& cache, const Pool& pool, std::size_t i) {
  const WorkItem& item = pool.items()[i];
  auto holder = cache.entry(item.entry_dir).holder();
  if (!holder) return std::nullopt;
  return HeldGraph{short_name(item), holder->owner.value_or("whoever made their locks (they name no owner)"),
                   holder->described};
}

// As held_graph, for a line that names the graph in any case.
HeldGraph held_graph_or(const cache::Cache& cache, const Pool& pool, std::size_t i, const std::string& otherwise) {
  return held_graph(cache, pool, i).value_or(HeldGraph{short_name(pool.items()[i]), otherwise, otherwise});
}

class PoolLoop {
public:
  PoolLoop(Pool& pool, const cache::Cache& cache, const RunnerConfig& config, ProgressDisplay& progress,
           WorkerRunner& runner)
      : pool_(pool), cache_(cache), config_(config), progress_(progress), runner_(runner),
        cluster_(config.cluster ? *config.cluster : alone_) {}

  PoolRunResult run() {
    PoolRunResult result;
    start_ = runner_.now();
    cluster_.set_run(config_.run);
    while (!pool_.finished()) {
      const double now = runner_.now();
      follow_roll(now);
      if (pool_.only_deferred_left()) say_what_is_waited_for();
      look_at_due(now);
      if (pool_.only_deferred_left()) {
        leave_what_cannot_be_waited_for(now);
        if (pool_.finished()) break;
      }
      const bool picks_cut = pick_and_start(now);
      trace_load(now);
      if (pool_.finished()) break;
      auto events = runner_.wait(std::chrono::milliseconds(wait_ms(now, picks_cut)));
      if (events.interrupt != 0) {
        result.interrupted_by = events.interrupt;
        break;
      }
      reap(events.ended);
      const double t = runner_.now();
      trace_load(t);
      progress_.update(snapshot(pool_, t - start_, t));
    }
    end(result.interrupted_by);
    result.wall_seconds = runner_.now() - start_;
    if (config_.trace) config_.trace->close(pool_, runner_.now());
    return result;
  }

private:
  // Launchers that joined or left the roll since its last look move the
  // shares: each launcher's own come first.
  void follow_roll(double now) {
    auto members = cluster_.members_changed(now);
    if (!members) return;
    pool_.share_among(*members, cluster_.self());
    std::size_t own = 0;
    for (const auto& item : pool_.items()) own += item.own_share ? 1 : 0;
    // Said once the graphs are split; alone on the roll (one host's run),
    // there is nothing to say.
    const bool first_split = !roll_said_ && members->size() > 1;
    roll_said_ = roll_said_ || first_split;
    spdlog::log(first_split ? spdlog::level::info : spdlog::level::debug,
                "{} launcher(s) on this cache's roll: {} of the {} graph(s) are this one's to start first",
                members->size(), own, pool_.items().size());
  }

  // A wait that may last hours says what it waits for, once the graphs
  // others hold are all that is left: in one line (held_summary.hpp), each
  // graph once.
  void say_what_is_waited_for() {
    std::vector<HeldGraph> waited;
    for (std::size_t i = 0; i < pool_.items().size(); ++i) {
      if (pool_.progress()[i].state != ItemState::deferred || !waits_said_.insert(i).second) continue;
      if (auto held = held_graph(cache_, pool_, i)) waited.push_back(std::move(*held));
    }
    tell_held(progress_, waited, [](const HeldGraph& g) { return "waiting for " + g.graph + ", held by " + g.described; },
              "waiting for ");
  }

  // The graphs due a look: here first; pending here, the lock that deferred
  // it may be another host's, which only the cache they share shows (alone:
  // still pending). Those are looked at together, within the tick's budget.
  void look_at_due(double now) {
    const double looks_until = now + std::chrono::duration<double>(kHeldLookBudgetPerTick).count();
    std::vector<std::size_t> shared_due;
    for (std::size_t i : pool_.due_revisits(now)) {
      std::optional<storage::Time> lease_ends;
      Pool::Found found = look_at(cache_, cluster_, pool_.items()[i].entry_dir, nullptr, &lease_ends);
      if (found == Pool::Found::pending) {
        shared_due.push_back(i);
        continue;
      }
      revisit_here(i, found, now);
      if (found == Pool::Found::locked) look_when_lease_ends(i, lease_ends, now);
    }
    if (shared_due.empty()) return;
    std::vector<fs::path> dirs;
    for (std::size_t i : shared_due) dirs.push_back(pool_.items()[i].entry_dir);
    auto looked = cluster_.look_all(dirs, [&] { return runner_.now() >= looks_until; });
    for (std::size_t k = 0; k < shared_due.size(); ++k) {
      if (!looked[k]) continue; // still due: looked at next tick
      const std::size_t i = shared_due[k];
      const WorkItem& item = pool_.items()[i];
      if (*looked[k] == Pool::Found::done) progress_.event(cluster_.done_elsewhere_event() + short_name(item));
      else if (*looked[k] == Pool::Found::failed)
        progress_.failure("FAILED " + short_name(item) + " (failed on another node); log " +
                          cache_.entry(item.entry_dir).log_path().string());
      pool_.revisit(i, *looked[k], now, cache_.entry(item.entry_dir).log_path());
      if (*looked[k] == Pool::Found::held_elsewhere) look_when_lease_ends(i, cluster_.lease_ends(item.entry_dir), now);
    }
  }

  // A lock whose lease's end a look read is looked at again then, when
  // that comes sooner than its backoff (pool.hpp).
  void look_when_lease_ends(std::size_t i, const std::optional<storage::Time>& lease_ends, double now) {
    if (!lease_ends) return;
    const double in = std::chrono::duration<double>(*lease_ends - std::chrono::system_clock::now()).count();
    pool_.look_again_when_lease_ends(i, now + in, now);
  }

  // What a look at item i's entry here found: a failure says who failed it
  // when another launcher of this run did.
  void revisit_here(std::size_t i, Pool::Found found, double at) {
    const fs::path& dir = pool_.items()[i].entry_dir;
    std::string how = found == Pool::Found::failed ? failed_in_run(cache_, config_, dir) : std::string();
    if (!how.empty()) progress_.failure("FAILED " + short_name(pool_.items()[i]) + " (" + how + ")");
    pool_.revisit(i, found, at, cache_.entry(dir).log_path(), how);
  }

  // Only graphs others hold are left: those whose holder proves alive are
  // waited for (up to --lock-timeout when it is another host's); the others
  // are left to their holders, and said so in one line.
  void leave_what_cannot_be_waited_for(double now) {
    std::vector<HeldGraph> left_after_timeout, left;
    const auto lock_timeout_seconds = static_cast<double>(config_.stale_lock_age.count());
    for (std::size_t i = 0; i < pool_.items().size(); ++i) {
      const ItemProgress& p = pool_.progress()[i];
      if (p.state != ItemState::deferred) continue;
      const fs::path& dir = pool_.items()[i].entry_dir;
      if (cluster_.entries_elsewhere() && !locked_in_mirror(cache_, dir)) {
        // Another host's lock in a shared cache, unlike the framework's
        // local one, says who holds it and until when, and its holder
        // renews it while it compiles: waiting for its result (brought
        // here when it lands) or its expiry (then compiled here) leaves
        // this host's cache and the report complete, which is what
        // pre-warming a node is for. Not yet looked at (deferred by a
        // worker a moment ago): the look comes first. A holder that renews
        // past --lock-timeout is left to itself, as a waiting wrapper
        // gives up then.
        if (!p.held_elsewhere || now - p.held_elsewhere_since < lock_timeout_seconds) continue;
        left_after_timeout.push_back(held_graph_or(cache_, pool_, i, "other hosts, in the shared cache"));
        pool_.leave_to_lock_holder(i);
        continue;
      }
      if (const Holder holder = holder_proves_alive(cache_, dir); holder != Holder::none) {
        // Another host's that renews past --lock-timeout is left to it, as above.
        if (holder == Holder::alive_here || now - p.deferred_since < lock_timeout_seconds) continue;
        left_after_timeout.push_back(held_graph_or(cache_, pool_, i, "other hosts, in the cache"));
        pool_.leave_to_lock_holder(i);
        continue;
      }
      // Let go meanwhile (done, failed, or pending again): looked at as
      // any revisit does, never left to a holder that is gone.
      if (Pool::Found found = look_at(cache_, cluster_, dir); found != Pool::Found::locked) {
        revisit_here(i, found, now);
        continue;
      }
      left.push_back(held_graph_or(cache_, pool_, i, "processes that let go since"));
      pool_.leave_to_lock_holder(i);
    }
    const std::string lock_timeout = util::format_seconds(lock_timeout_seconds);
    tell_held(progress_, left_after_timeout,
              [&](const HeldGraph& g) {
                return "locked by another node for over " + lock_timeout + " (--lock-timeout), left to it: " + g.graph;
              },
              "locked by other nodes for over " + lock_timeout + " (--lock-timeout), left to them: ");
    tell_held(progress_, left, [](const HeldGraph& g) { return "locked by another process, left to it: " + g.graph; },
              "locked by other processes, left to them: ");
  }

  // Picks what the pool allows and takes each graph's lock (the cluster's
  // take; alone, left to the worker at once), starting the workers of the
  // takes that end, until no slot is free. The picks' looks have a budget
  // of their own: late in a run most graphs left in the order are done or
  // held elsewhere, and passing them (a look each, sometimes a lock's read)
  // must not keep the loop from reaping the workers that end meanwhile.
  // Whether the budget cut the picks short: what is left is picked next
  // tick, with no wait between.
  bool pick_and_start(double now) {
    const double picks_until = runner_.now() + std::chrono::duration<double>(kHeldLookBudgetPerTick).count();
    bool cut = false;
    for (;;) {
      while (auto next = pool_.pick(now)) {
        if (runner_.now() >= picks_until) {
          cut = true;
          break;
        }
        const std::size_t i = *next;
        if (settled_by_a_look(i, now)) continue;
        pool_.start(i, now);
        // The slot is the take's until it ends (settle_takes).
        cluster_.begin_take(i, pool_.items()[i].entry_dir);
      }
      // Takes ended: their workers start, and slots a take gave back are
      // picked for again.
      if (!settle_takes()) return cut;
    }
  }

  // Launchers sharing a cache all walk the graphs in about the same order,
  // so by the time one reaches a graph another has often compiled it or
  // holds it: a look settles that without a worker's start (a process, the
  // key, the lock; on S3 the same listing and download as here). The look
  // is a stat of the entry; beyond this host's directory, the cluster's (on
  // S3 the entry's listing, shared_entry_look.hpp, and the result's
  // download when it is done: a LIST, not a lock taken and released around
  // a worker that finds it done). Anything else is the worker's to handle
  // (a stale lock to break, a cached failure to report). A graph of this
  // launcher's own share, once the shares are split, is rarely another's:
  // the cluster's look is spared, and on S3 the take's listing finds it
  // done if it is. Only a first attempt is looked at.
  bool settled_by_a_look(std::size_t i, double now) {
    const WorkItem& item = pool_.items()[i];
    if (pool_.progress()[i].attempts != 0) return false;
    const bool own = pool_.shares_split() && item.own_share;
    bool blocks = false; // another process holds its lock now (not stale)
    Pool::Found found = look_at(cache_, cluster_, item.entry_dir, &blocks);
    bool downloaded = false;
    if (found == Pool::Found::pending && !own) {
      found = cluster_.look(item.entry_dir);
      downloaded = found == Pool::Found::done;
    }
    switch (found) {
    case Pool::Found::done:
      pool_.revisit(i, Pool::Found::done, now);
      progress_.event((downloaded ? cluster_.done_elsewhere_event() : "compiled by another process: ") +
                      short_name(item));
      return true;
    case Pool::Found::held_elsewhere: pool_.mark_held_elsewhere(i, now); return true;
    case Pool::Found::locked:
      if (!blocks) return false;
      pool_.mark_locked_elsewhere(i, now);
      return true;
    default: return false;
    }
  }

  // Starts the workers of the takes ended; whether one gave its slot back.
  bool settle_takes() {
    bool slot_freed = false;
    for (const auto& ended : cluster_.takes_ended()) {
      const std::size_t i = ended.item;
      if (ended.take.found == Pool::Found::pending) {
        start_worker(i, ended.take.lock_taken);
        continue;
      }
      const double at = runner_.now();
      slot_freed = true;
      pool_.withdraw(i, at);
      switch (ended.take.found) {
      case Pool::Found::done:
        pool_.revisit(i, Pool::Found::done, at);
        progress_.event(cluster_.done_elsewhere_event() + short_name(pool_.items()[i]));
        break;
      case Pool::Found::failed:
        pool_.revisit(i, Pool::Found::failed, at, {}, ended.how);
        progress_.failure("FAILED " + short_name(pool_.items()[i]) + " (" + ended.how + ")");
        break;
      default: pool_.mark_held_elsewhere(i, at); break; // held_elsewhere, the one answer left to a take
      }
    }
    return slot_freed;
  }

  // The worker of item i, which the pool has started.
  void start_worker(std::size_t i, bool lock_taken) {
    const WorkItem& item = pool_.items()[i];
    const ItemProgress& p = pool_.progress()[i];
    std::string attempt_name = short_name(item) + ".attempt" + std::to_string(p.attempts);
    AttemptSpec attempt{i, item.entry_dir, config_.log_dir / (attempt_name + ".log"),
                        config_.log_dir / (attempt_name + ".result.json"),
                        p.attempts > 1 || config_.retry_cached_failures, lock_taken, pool_.last_attempt(i)};
    // Now, not the tick's start: looks and locks in a shared cache take
    // requests, and a compile's measured time starts with its worker.
    const double started_at = runner_.now();
    pool_.begin(i, started_at);
    if (config_.trace) config_.trace->attempt_started(i, started_at);
    if (auto started = runner_.start(attempt); !started) {
      if (lock_taken) cluster_.attempt_ended(item.entry_dir);
      AttemptInfo info{0, "could not start: " + started.error(), 0, attempt.log, Blame::surroundings};
      pool_.finish(i, AttemptEnd::failed, info, started_at);
      if (config_.trace) config_.trace->attempt_ended(pool_, i, AttemptEnd::failed, info, started_at);
    } else if (lock_taken) {
      locks_held_.insert(i);
    }
  }

  // Until the next graph is due a look, or the status line's next tick; at
  // once when the picks were cut short.
  [[nodiscard]] int wait_ms(double now, bool picks_cut) const {
    if (picks_cut) return 0;
    int timeout_ms = kProgressTickMs;
    if (auto due = pool_.next_due(now))
      timeout_ms = std::clamp(static_cast<int>((*due - now) * 1000) + 1, 1, kProgressTickMs);
    return timeout_ms;
  }

  void reap(const std::vector<AttemptEnded>& ended_attempts) {
    for (const auto& ended : ended_attempts) {
      // The worker has ended: its result goes up, then the lock goes.
      if (locks_held_.erase(ended.item) > 0) cluster_.attempt_ended(pool_.items()[ended.item].entry_dir);
      const double at = runner_.now();
      pool_.finish(ended.item, ended.end, ended.info, at);
      if (config_.trace) config_.trace->attempt_ended(pool_, ended.item, ended.end, ended.info, at);
      tell(progress_, pool_, ended);
    }
  }

  void trace_load(double now) {
    if (!config_.trace) return;
    config_.trace->load(pool_, now);
    config_.trace->waits(pool_, now);
  }

  // Interrupted: the workers are stopped and their locks let go. Either
  // way the last results go up before the run is over.
  void end(int interrupted_by) {
    if (interrupted_by != 0) {
      progress_.finish();
      spdlog::warn("received {}; stopping {} compile(s)", util::signal_name(interrupted_by), runner_.running());
      runner_.stop_all(interrupted_by);
      for (std::size_t i : locks_held_) cluster_.attempt_ended(pool_.items()[i].entry_dir);
    } else {
      const double t = runner_.now();
      progress_.update(snapshot(pool_, t - start_, t));
      progress_.finish();
    }
    cluster_.finish();
  }

  Pool& pool_;
  const cache::Cache& cache_;
  const RunnerConfig& config_;
  ProgressDisplay& progress_;
  WorkerRunner& runner_;
  Cluster alone_;
  Cluster& cluster_;
  double start_ = 0;
  bool roll_said_ = false;
  std::set<std::size_t> waits_said_; // each graph held elsewhere is named once
  std::set<std::size_t> locks_held_; // shared locks this launcher holds for its running workers
};

} // namespace

PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                       ProgressDisplay& progress) {
  auto runner = make_process_runner(config);
  return run_pool(pool, cache, config, progress, *runner);
}

PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                       ProgressDisplay& progress, WorkerRunner& runner) {
  return PoolLoop(pool, cache, config, progress, runner).run();
}

} // namespace npc::launcher
