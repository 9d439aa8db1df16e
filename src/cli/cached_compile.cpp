#include <npc/cli/cached_compile.hpp>

#include <spdlog/spdlog.h>

#include <npc/cli/neff_output.hpp>
#include <npc/util/error.hpp>

namespace npc::cli {

namespace {

// A hit: counted, its entry used now (for the LRU order), and, when it was
// brought in from another tier, the directory kept within its limits.
CachedCompileEnd hit(const CachedCompile& call, const cache::Entry& served, bool brought_in) {
  std::ignore = served.touch();
  call.count(cache::hit_of(served.dir()));
  if (brought_in) cache::evict_after_write(call.tiers.directory(), call.eviction);
  return {served, {compile::EntryOutcome::already_done, std::nullopt, {}, {}}};
}

} // namespace


CachedCompileEnd compile_through_cache(const CachedCompile& call, compile::EntryCompileOptions options) {
  if (auto found = call.tiers.find(call.lookup, call.deliver)) return hit(call, found->entry, found->brought_in);
  const cache::Entry entry = call.tiers.directory().entry(call.lookup.key);
  if (entry.looks_failed() && !options.retry_failed) {
    call.count({.failed = 1});
    return {std::nullopt, {compile::EntryOutcome::cached_failure, std::nullopt, {}, entry.log_path()}};
  }

  if (call.before_compile) call.before_compile();
  call.store_graph();
  // Copied under the entry's lock: once it is released, an eviction with a
  // small limit may remove the entry before it is read.
  DeliveryUnderLock delivery([&](const cache::Entry& done) {
    if (!call.deliver(done)) throw StoredNeffFault("the NEFF stored for " + done.dir().string() + " fails its check");
  });
  options.while_done_and_locked = [&](const cache::Entry& done) { delivery(done); };
  options.store_missing_graph = [&](const cache::Entry&) { call.store_graph(); };
  compile::EntryCompileResult result = call.tiers.compile(call.lookup.key, entry.dir(), options);
  // Removed by another process (an eviction with --ttl 0 as soon as the
  // compile that held the lock released it, `neuron_cache rm`): what was
  // asked for still stands, so the graph is stored again and compiled, a
  // few times at most.
  for (int again = 0; result.outcome == compile::EntryOutcome::removed && !call.tiers.compiles_shared() &&
                      again < kRemovedRetries;
       ++again) {
    spdlog::warn("{} was removed by another process; storing its graph again", entry.dir().string());
    call.store_graph();
    result = compile::compile_entry(call.tiers.directory(), entry.dir(), options);
  }
  call.count(delivery.usage_of(result, entry.dir()));
  if (result.outcome != compile::EntryOutcome::compiled && result.outcome != compile::EntryOutcome::already_done)
    return {std::nullopt, std::move(result)};
  // Compiled and cached, but the output cannot take it: nothing that follows
  // could write there either.
  delivery.rethrow_fault();
  // A result another host put in the shared tier meanwhile, brought here.
  if (!delivery.delivered() && !call.deliver(entry))
    throw StoredNeffFault("the NEFF of " + entry.dir().string() + " fails its check");
  std::ignore = entry.touch();
  if (result.outcome == compile::EntryOutcome::compiled) cache::evict_after_write(call.tiers.directory(), call.eviction);
  return {std::nullopt, std::move(result)};
}

} // namespace npc::cli
