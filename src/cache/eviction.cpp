#include <npc/cache/eviction.hpp>

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

#include <npc/cache/keeping_way.hpp>
#include <npc/util/error.hpp>

namespace npc::cache {

namespace {
// A graph with no result yet (killed attempts included: they stay pending).
bool is_pending(const EntryInfo& e) { return e.state == EntryState::pending; }

// Compared in seconds: a TTL of centuries in nanoseconds overflows.
bool used_within(util::WallTime now, util::WallTime last_used, std::chrono::seconds ttl) {
  return std::chrono::duration_cast<std::chrono::seconds>(now - last_used) < ttl;
}
} // namespace

std::vector<const EntryInfo*> plan_eviction(const std::vector<EntryInfo>& entries,
                                            const EvictionPolicy& policy, util::WallTime now,
                                            std::size_t* kept_by_ttl, std::size_t* kept_locked,
                                            std::size_t* kept_pending) {
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::vector<const EntryInfo*> order;
  for (const auto& e : entries) order.push_back(&e);
  // Oldest use first; the key breaks ties so the order is reproducible.
  std::sort(order.begin(), order.end(), [](const EntryInfo* a, const EntryInfo* b) {
    if (a->last_used != b->last_used) return a->last_used < b->last_used;
    return a->key < b->key;
  });
  std::vector<const EntryInfo*> victims;
  std::size_t ttl_count = 0, locked_count = 0, pending_count = 0;
  for (const EntryInfo* e : order) {
    if (total <= policy.max_bytes) break;
    // Not by age either: an old pending graph is still work someone extracted
    // and nobody has compiled; removing it loses that work, and it frees
    // little (no NEFF). `neuron_cache rm` removes one on purpose.
    if (is_pending(*e)) {
      ++pending_count;
      continue;
    }
    if (used_within(now, e->last_used, policy.ttl)) {
      ++ttl_count; // and so is everything after it: all used more recently
      continue;
    }
    // Any lock, even one a compile would judge stale: a framework may be
    // waiting on it, and eviction is never urgent enough to break one.
    if (e->state == EntryState::locked || e->framework_lock.state != storage::LockState::absent) {
      ++locked_count;
      continue;
    }
    victims.push_back(e);
    total -= e->bytes;
  }
  if (kept_by_ttl) *kept_by_ttl = ttl_count;
  if (kept_locked) *kept_locked = locked_count;
  if (kept_pending) *kept_pending = pending_count;
  return victims;
}

EvictionReport evict(const Cache& cache, const EvictionPolicy& policy, DryRun dry_run) {
  EvictionReport report;
  std::unique_ptr<KeepingWay::EvictionHold> lock;
  if (dry_run == DryRun::no) {
    lock = cache.keeping().take_eviction_lock(cache);
    if (!lock) return report; // someone else is evicting
    cache.empty_trash();
  }
  report.ran = true;
  auto now = cache.clock().now();
  std::vector<EntryInfo> entries = cache.list();
  report.entries_before = entries.size();
  for (const auto& e : entries) report.bytes_before += e.bytes;
  report.bytes_after = report.bytes_before;

  auto victims = plan_eviction(entries, policy, now, &report.kept_by_ttl, &report.kept_locked,
                               &report.kept_pending);
  if (dry_run == DryRun::yes) {
    for (const EntryInfo* victim : victims) {
      report.deleted.push_back(*victim);
      report.bytes_after -= victim->bytes;
    }
  } else {
    // What happened to each victim, written by index from several threads
    // (removing 10,000 entries is 50,000 unlinks, all waiting on the kernel).
    enum class Fate { vanished, kept_by_ttl, kept_locked, kept_pending, deleted };
    std::vector<Fate> fates(victims.size(), Fate::vanished);
    std::vector<EntryInfo> removed_infos(victims.size());
    // A storage's removals are shared out over its connections.
    cache.share_out(victims.size(), [&](std::size_t connection, std::size_t i) {
      {
        // Look again: it may have been used or locked since the listing.
        const Entry entry = cache.entry(victims[i]->dir, connection);
        auto fresh = cache.look_again(entry, *victims[i]);
        if (!fresh) throw EnvironmentError(fresh.error());
        if (fresh->state == EntryState::absent) return;
        if (is_pending(*fresh)) { // its result was dropped since (clear-neffs, a demote)
          fates[i] = Fate::kept_pending;
          return;
        }
        if (used_within(now, fresh->last_used, policy.ttl)) {
          fates[i] = Fate::kept_by_ttl;
          return;
        }
        auto removed = entry.remove();
        if (!removed) {
          spdlog::warn("eviction: {}", removed.error());
          return;
        }
        if (!*removed) {
          fates[i] = Fate::kept_locked;
          return;
        }
        fates[i] = Fate::deleted;
        removed_infos[i] = std::move(*fresh);
      }
    });
    for (std::size_t i = 0; i < victims.size(); ++i) {
      switch (fates[i]) {
      case Fate::vanished: break;
      case Fate::kept_by_ttl: ++report.kept_by_ttl; break;
      case Fate::kept_locked: ++report.kept_locked; break;
      case Fate::kept_pending: ++report.kept_pending; break;
      case Fate::deleted:
        report.bytes_after -= std::min(report.bytes_after, removed_infos[i].bytes);
        report.deleted.push_back(std::move(removed_infos[i]));
        break;
      }
    }
  }
  if (dry_run == DryRun::no) report.stale_temps_removed = cache.keeping().after_eviction(cache, entries, now);
  return report;
}

void evict_after_write(const Cache& cache, const EvictionPolicy& policy) {
  if (!cache.keeping().evicts_after_write(cache)) return;
  try {
    auto report = evict(cache, policy);
    if (!report.deleted.empty())
      spdlog::info("evicted {} cache entries ({} bytes) to stay under the limit of {} bytes",
                   report.deleted.size(), report.bytes_before - report.bytes_after,
                   policy.max_bytes);
  } catch (const std::exception& e) {
    spdlog::warn("cache eviction skipped: {}", e.what());
  }
}

} // namespace npc::cache
