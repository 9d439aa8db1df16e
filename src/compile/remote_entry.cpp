#include <npc/compile/remote_entry.hpp>

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

cache::FetchOutcome fetch_remote_result(const cache::RemoteCache& remote, const cache::CacheKey& key,
                                         std::chrono::milliseconds lock_wait) {
  const bool said_before = remote.rejected(key);
  auto fetched = remote.fetch_result(key, lock_wait);
  if (!fetched) throw EnvironmentError(fetched.error());
  switch (fetched->outcome) {
  case cache::FetchOutcome::copied: spdlog::debug("downloaded {} into {}", remote.describe(key), remote.mirror().root().string()); break;
  case cache::FetchOutcome::rejected:
    // Once per entry: it is looked at again before and after its lock.
    if (!said_before)
      spdlog::warn("not using {}: {}; compiling it again, and the result replaces it there", remote.describe(key),
                   fetched->detail);
    return cache::FetchOutcome::miss;
  default: break;
  }
  return fetched->outcome;
}

namespace {

EntryCompileResult result_of(EntryOutcome outcome) {
  EntryCompileResult result;
  result.outcome = outcome;
  return result;
}

// The remote's result arrived (or was there): what the caller gets instead
// of a compile. nullopt: nothing usable there.
std::optional<EntryCompileResult> arrived(const cache::RemoteCache& remote, const cache::CacheKey& key,
                                          const EntryCompileOptions& options) {
  switch (fetch_remote_result(remote, key, options.lock_wait)) {
  case cache::FetchOutcome::copied:
  case cache::FetchOutcome::already_done: return result_of(EntryOutcome::already_done);
  case cache::FetchOutcome::failure_copied:
    if (!options.retry_failed) return result_of(EntryOutcome::cached_failure);
    return std::nullopt;
  default: return std::nullopt;
  }
}

} // namespace

EntryCompileResult compile_remote_entry(const cache::RemoteCache& remote, const cache::CacheKey& key,
                                        const EntryCompileOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.lock_wait;
  storage::Lock lock; // renewed while held
  bool told = false;
  for (;;) {
    auto got = remote.try_lock(key);
    if (!got) throw EnvironmentError(got.error());
    if (auto* taken = std::get_if<storage::Lock>(&*got)) {
      lock = std::move(*taken);
      break;
    }
    const std::string holder = std::get<storage::Lock::Held>(*got).facts.holder();
    if (auto result = arrived(remote, key, options)) return *result;
    if (options.lock_wait.count() == 0) return result_of(EntryOutcome::locked_elsewhere);
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw EnvironmentError("timed out after " +
                             util::format_seconds(static_cast<double>(options.lock_wait.count()) / 1000.0) +
                             " waiting for " + remote.describe(key) + ", held by " + holder +
                             " (a lock whose holder stopped renewing it frees itself after " +
                             util::format_seconds(static_cast<double>(storage::kLockTtl.count())) + ")");
    if (!told) {
      spdlog::info("waiting for {}, compiled by {}", remote.describe(key), holder);
      told = true;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kRemoteLockPoll, deadline - now));
    // The holder's result first: taking a lock just released by a holder
    // that published costs a write and a delete for nothing.
    if (auto result = arrived(remote, key, options)) return *result;
  }
  // Published between our first look and the lock: nothing to compile.
  if (auto result = arrived(remote, key, options)) return *result;
  EntryCompileResult result = compile_entry(remote.mirror(), remote.mirror().entry_dir(key), options);
  // Done in the mirror but not in S3, whose lock we hold: an earlier
  // attempt here compiled it and died uploading (killed during a stalled
  // PUT). Its result is ours to upload now; "done by another process"
  // would leave S3 pending for good.
  const bool upload_of_earlier_attempt = result.outcome == EntryOutcome::already_done;
  if (result.outcome == EntryOutcome::compiled || result.outcome == EntryOutcome::failed ||
      upload_of_earlier_attempt) {
    auto pushed = remote.push(key);
    if (!pushed)
      spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", remote.describe(key),
                   pushed.error());
    else if (upload_of_earlier_attempt) {
      spdlog::info("uploaded {}, compiled into {} by an earlier attempt that did not finish its upload",
                   remote.describe(key), remote.mirror().root().string());
      result.outcome = EntryOutcome::compiled; // here, not by another process
    }
  }
  return result;
}

} // namespace npc::compile
