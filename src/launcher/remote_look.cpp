#include <npc/launcher/remote_look.hpp>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

Pool::Found StorageEntryLook::look(const fs::path& entry_dir) {
  auto key = cache::parse_key(entry_dir.string());
  if (!key) return Pool::Found::pending; // not an entry the remote names: the worker says what is wrong
  const std::string folder = key->relative_path().generic_string();
  auto names = remote_.storage()->list(folder);
  if (!names) {
    spdlog::warn("cannot look at {}: {}; starting its compile, which reports it if it persists", remote_.describe(*key),
                 names.error());
    return Pool::Found::pending;
  }
  const cache::ListedEntry listed = cache::read_listing(*names);
  if (listed.done || (listed.failed && retry_ == RetryFailed::no)) {
    // No wait for the mirror entry's lock: a local process holding it is
    // looked at again as any local lock is.
    auto fetched = remote_.fetch_result(*key, std::chrono::milliseconds(0));
    if (!fetched) {
      spdlog::warn("cannot download {}: {}; starting its compile, which reports it if it persists",
                   remote_.describe(*key), fetched.error());
      return Pool::Found::pending;
    }
    switch (fetched->outcome) {
    case cache::FetchOutcome::copied:
    case cache::FetchOutcome::already_done: return Pool::Found::done;
    case cache::FetchOutcome::failure_copied: return Pool::Found::failed;
    case cache::FetchOutcome::busy: return Pool::Found::locked;
    case cache::FetchOutcome::rejected:
      // As a wrapper's lookup: an unusable result is compiled again.
      spdlog::warn("not using {}: {}", remote_.describe(*key), fetched->detail);
      return Pool::Found::pending;
    case cache::FetchOutcome::miss: break; // removed since the listing: the lock decides
    }
  }
  if (!listed.has_lock) return Pool::Found::pending;
  auto facts = remote_.judge_lock(*key);
  if (!facts) {
    spdlog::warn("cannot read the lock of {}: {}; starting its compile", remote_.describe(*key), facts.error());
    return Pool::Found::pending;
  }
  if (!facts->blocks()) return Pool::Found::pending;
  spdlog::debug("{} is still held in S3: the lock {}", key->module_name(), facts->describe());
  return Pool::Found::held_elsewhere;
}

} // namespace npc::launcher
