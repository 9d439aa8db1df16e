#include <npc/cache/publish.hpp>

#include <npc/cache/layout.hpp>

namespace npc::cache {

Status publish_result(storage::Storage& storage, std::string_view entry_key, const EntryResult& result,
                      MayHold may_hold) {
  auto key_of = [&](std::string_view file) { return std::string(entry_key) + "/" + std::string(file); };
  if (result.flags)
    if (auto placed = storage.put_file_if_absent(*result.flags, key_of(kFlagsFile)); !placed)
      return fail(placed.error());
  if (result.graph)
    if (auto placed = storage.put_file_if_absent(*result.graph, key_of(kGraphFile)); !placed)
      return fail(placed.error());
  auto write_record = [&]() -> Status {
    if (!result.record) return ok_status();
    return storage.write_atomic(key_of(kMetaFile), *result.record);
  };
  if (result.neff) {
    if (may_hold.done)
      if (auto s = storage.remove(key_of(kDoneFile)); !s) return s;
    if (auto s = storage.put_file(*result.neff, key_of(kNeffFile)); !s) return s;
    if (auto s = write_record(); !s) return s;
    if (auto s = storage.write_atomic(key_of(kDoneFile), ""); !s) return s;
    // Leftovers of earlier attempts: what failing to remove them costs is a
    // stale log beside a done entry, which readers ignore.
    if (may_hold.log) std::ignore = storage.remove(key_of(kLogFile));
    if (may_hold.killed_log) std::ignore = storage.remove(key_of(kKilledLogFile));
    return ok_status();
  }
  if (result.log) {
    if (auto s = write_record(); !s) return s;
    return storage.put_file(*result.log, key_of(kLogFile));
  }
  return write_record();
}

} // namespace npc::cache
