#pragma once
// Transitional names for what entry.hpp now provides, kept only until the
// bundle code calls Entry itself.

#include <npc/cache/entry.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

[[nodiscard]] inline Result<EntrySnapshot> open_entry_snapshot(const fs::path& entry_dir) {
  return Entry::open_snapshot(entry_dir);
}
[[nodiscard]] inline Status check_entry_trust(const Cache& cache, const fs::path& entry_dir) {
  return cache.entry(entry_dir).check_trust();
}
[[nodiscard]] inline Status publish_incoming(const Cache& cache, const fs::path& entry_dir,
                                             const IncomingEntry& incoming) {
  return cache.entry(entry_dir).publish_incoming(incoming);
}

} // namespace npc::cache
