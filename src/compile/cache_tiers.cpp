#include <npc/compile/cache_tiers.hpp>

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/secondary.hpp>
#include <npc/util/error.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

// The shared tier's result for `key` into the directory, for a lookup
// before compiling: a rejected one is said once and reads as a miss; a
// shared tier that cannot be read throws EnvironmentError.
cache::FetchOutcome fetch_shared_result(const cache::SharedTier& shared, const cache::CacheKey& key,
                                         std::chrono::milliseconds lock_wait) {
  const bool said_before = shared.rejected(key);
  auto fetched = shared.fetch_result(key, lock_wait);
  if (!fetched) throw EnvironmentError(fetched.error());
  switch (fetched->outcome) {
  case cache::FetchOutcome::copied: spdlog::debug("downloaded {} into {}", shared.describe(key), shared.mirror().root().string()); break;
  case cache::FetchOutcome::rejected:
    // Once per entry: it is looked at again before and after its lock.
    if (!said_before)
      spdlog::warn("not using {}: {}; compiling it again, and the result replaces it there", shared.describe(key),
                   fetched->detail);
    return cache::FetchOutcome::miss;
  default: break;
  }
  return fetched->outcome;
}

EntryCompileResult result_of(EntryOutcome outcome) {
  EntryCompileResult result;
  result.outcome = outcome;
  return result;
}

// The shared tier's result arrived (or was there): what the caller gets instead
// of a compile. nullopt: nothing usable there.
std::optional<EntryCompileResult> arrived(const cache::SharedTier& shared, const cache::CacheKey& key,
                                          const EntryCompileOptions& options) {
  switch (fetch_shared_result(shared, key, options.lock_wait)) {
  case cache::FetchOutcome::copied:
  case cache::FetchOutcome::already_done: return result_of(EntryOutcome::already_done);
  case cache::FetchOutcome::failure_copied:
    if (!options.retry_failed) return result_of(EntryOutcome::cached_failure);
    return std::nullopt;
  default: return std::nullopt;
  }
}

// Compiles the directory's entry of `key` under the shared entry's lock (see
// the header). Outcomes and errors as compile_entry's, plus already_done and
// cached_failure for a result another host published while we waited.
EntryCompileResult compile_shared_entry(const cache::SharedTier& shared, const cache::CacheKey& key,
                                        const EntryCompileOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.lock_wait;
  storage::Lock lock; // renewed while held
  bool told = false;
  for (;;) {
    auto got = shared.try_lock(key);
    if (!got) throw EnvironmentError(got.error());
    if (auto* taken = std::get_if<storage::Lock>(&*got)) {
      lock = std::move(*taken);
      break;
    }
    const std::string holder = std::get<storage::Lock::Held>(*got).facts.holder();
    if (auto result = arrived(shared, key, options)) return *result;
    if (options.lock_wait.count() == 0) return result_of(EntryOutcome::locked_elsewhere);
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw EnvironmentError("timed out after " +
                             util::format_seconds(static_cast<double>(options.lock_wait.count()) / 1000.0) +
                             " waiting for " + shared.describe(key) + ", held by " + holder +
                             " (a lock whose holder stopped renewing it frees itself after " +
                             util::format_seconds(static_cast<double>(storage::kLockTtl.count())) + ")");
    if (!told) {
      spdlog::info("waiting for {}, compiled by {}", shared.describe(key), holder);
      told = true;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kSharedLockPoll, deadline - now));
    // The holder's result first: taking a lock just released by a holder
    // that published costs a write and a delete for nothing.
    if (auto result = arrived(shared, key, options)) return *result;
  }
  // Published between our first look and the lock: nothing to compile.
  if (auto result = arrived(shared, key, options)) return *result;
  // A graph the launcher left in the shared tier (shared_graphs.hpp) comes
  // now, under the lock: only the host that compiles it downloads it.
  auto graph = shared.fetch_graph(key);
  if (!graph) throw EnvironmentError(graph.error());
  if (!*graph) return result_of(EntryOutcome::removed);
  EntryCompileResult result = compile_entry(shared.mirror(), shared.mirror().entry_dir(key), options);
  // Done in the mirror but not in the shared tier, whose lock we hold: an earlier
  // attempt here compiled it and died uploading (killed during a stalled
  // PUT). Its result is ours to upload now; "done by another process"
  // would leave it pending there for good.
  const bool upload_of_earlier_attempt = result.outcome == EntryOutcome::already_done;
  if (result.outcome == EntryOutcome::compiled || result.outcome == EntryOutcome::failed ||
      upload_of_earlier_attempt) {
    auto pushed = shared.push_as_holder(key, lock);
    if (!pushed)
      spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", shared.describe(key),
                   pushed.error());
    else if (upload_of_earlier_attempt) {
      spdlog::info("uploaded {}, compiled into {} by an earlier attempt that did not finish its upload",
                   shared.describe(key), shared.mirror().root().string());
      result.outcome = EntryOutcome::compiled; // here, not by another process
    }
  }
  return result;
}

} // namespace


CacheTiers::CacheTiers(const cache::Tiers& tiers, Unusable unusable, std::function<void()> before_open)
    : tiers_(tiers), unusable_(unusable), before_open_(std::move(before_open)) {}

void CacheTiers::prepare() {
  if (before_open_ && tiers_.shared() && !dropped_ && !shared_) before_open_();
}

bool CacheTiers::open() {
  if (!tiers_.shared() || dropped_) return false;
  if (!shared_) shared_.emplace(tiers_.connect().front(), tiers_.directory());
  return true;
}

void CacheTiers::unusable(const std::exception& e) {
  if (unusable_ == Unusable::fail) throw;
  spdlog::warn("the shared cache {} cannot be used ({}); compiling without it, into {} only", *tiers_.shared_url(), e.what(),
               tiers_.directory().describe());
  shared_.reset();
  dropped_ = true;
}

std::optional<std::string> CacheTiers::store_shared_graph(const cache::CacheKey& key, std::string_view graph,
                                                          const std::vector<std::string>& flags) {
  prepare();
  if (!open()) return std::nullopt;
  if (auto s = shared_->store_graph(key, graph, flags); !s) throw EnvironmentError(s.error());
  return shared_->describe(key) + "/" + std::string(cache::kGraphFile);
}

bool CacheTiers::fetch(const cache::CacheKey& key, std::chrono::milliseconds lock_wait) {
  prepare(); // outside the try: a program that cannot go on is no store failing
  try {
    if (!open()) return false;
    auto outcome = fetch_shared_result(*shared_, key, lock_wait);
    return outcome == cache::FetchOutcome::copied || outcome == cache::FetchOutcome::already_done;
  } catch (const EnvironmentError& e) {
    unusable(e);
    return false;
  }
}

std::optional<Found> CacheTiers::find(const Lookup& lookup, const std::function<bool(const cache::Entry&)>& take) {
  const cache::Cache& directory = tiers_.directory();
  // The hot path: one existence check, then `take`'s read that hashes and copies.
  const cache::Entry entry = directory.entry(lookup.key);
  if (entry.looks_done() && take(entry)) return Found{entry, false};
  if (lookup.legacy_key && *lookup.legacy_key != lookup.key) {
    cache::Entry legacy = directory.entry(*lookup.legacy_key);
    if (legacy.looks_done() && take(legacy)) return Found{std::move(legacy), false};
  }
  if (fetch(lookup.key, lookup.lock_wait) && take(entry)) return Found{entry, true};
  if (lookup.secondary_root &&
      cache::bring_from_secondary(directory, lookup.secondary_root(), lookup.key, lookup.lock_wait) && take(entry))
    return Found{entry, true};
  return std::nullopt;
}

EntryCompileResult CacheTiers::compile(const cache::CacheKey& key, const fs::path& entry_dir,
                                       const EntryCompileOptions& options) {
  prepare();
  try {
    if (open()) return compile_shared_entry(*shared_, key, options);
  } catch (const EnvironmentError& e) {
    unusable(e);
  }
  return compile_entry(tiers_.directory(), entry_dir, options);
}

} // namespace npc::compile
