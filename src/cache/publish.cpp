#include <npc/cache/publish.hpp>

#include <sys/stat.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

namespace {

bool is_regular_at(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool exists_at(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string key_in_entry(std::string_view entry_key, std::string_view file) {
  return std::string(entry_key) + "/" + std::string(file);
}

} // namespace

bool is_done_marker(std::string_view name) { return name == kDoneFile; }

bool looks_done_at(const fs::path& entry_dir) {
  return is_regular_at(entry_dir / kDoneFile) && is_regular_at(entry_dir / kNeffFile);
}

bool looks_failed_at(const fs::path& entry_dir) {
  return exists_at(entry_dir / kLogFile) && !exists_at(entry_dir / kDoneFile);
}

fs::path done_marker_at(const fs::path& entry_dir) { return entry_dir / kDoneFile; }

Status publish_result(storage::Storage& storage, std::string_view entry_key, const EntryResult& result,
                      MayHold may_hold) {
  auto key_of = [&](std::string_view file) { return key_in_entry(entry_key, file); };
  if (result.flags)
    if (auto placed = storage.write(key_of(kFlagsFile), storage::Body::file(*result.flags), storage::IfPresent::keep);
        !placed)
      return fail(placed.error());
  if (result.graph)
    if (auto placed = storage.write(key_of(kGraphFile), storage::Body::file(*result.graph), storage::IfPresent::keep);
        !placed)
      return fail(placed.error());
  auto write_record = [&]() -> Status {
    if (!result.record) return ok_status();
    return status_of(storage.write(key_of(kMetaFile), *result.record, storage::IfPresent::replace));
  };
  if (result.neff) {
    if (may_hold.done)
      if (auto s = storage.remove(key_of(kDoneFile)); !s) return s;
    if (auto s = status_of(
            storage.write(key_of(kNeffFile), storage::Body::file(*result.neff), storage::IfPresent::replace));
        !s)
      return s;
    if (auto s = write_record(); !s) return s;
    if (auto s = status_of(storage.write(key_of(kDoneFile), "", storage::IfPresent::replace)); !s) return s;
    // Leftovers of earlier attempts: what failing to remove them costs is a
    // stale log beside a done entry, which readers ignore.
    if (may_hold.log) std::ignore = storage.remove(key_of(kLogFile));
    if (may_hold.killed_log) std::ignore = storage.remove(key_of(kKilledLogFile));
    return ok_status();
  }
  if (result.log) {
    if (auto s = write_record(); !s) return s;
    return status_of(storage.write(key_of(kLogFile), storage::Body::file(*result.log), storage::IfPresent::replace));
  }
  return write_record();
}

Status demote_result(storage::Storage& storage, std::string_view entry_key) {
  auto key_of = [&](std::string_view file) { return key_in_entry(entry_key, file); };
  if (auto s = storage.remove(key_of(kDoneFile)); !s) return s;
  if (auto s = storage.remove(key_of(kNeffFile)); !s) return s;
  auto text = storage.read(key_of(kMetaFile), kMaxEntryMetaBytes);
  if (!text) {
    // Read first, since a record is the usual case: a look costs a
    // request on an object store only when the read failed.
    auto there = storage.stat(key_of(kMetaFile));
    if (!there) return fail(there.error());
    if (!*there) return ok_status();
    return fail(text.error());
  }
  auto record = parse_entry_meta(*text);
  if (!record) return storage.remove(key_of(kMetaFile));
  record->neff_sha256.reset();
  record->neff_bytes.reset();
  return status_of(storage.write(key_of(kMetaFile), serialize_entry_meta(*record), storage::IfPresent::replace));
}

Result<bool> remove_entry(storage::Storage& storage, std::string_view entry_key) {
  if (auto s = storage.remove(key_in_entry(entry_key, kDoneFile)); !s) return fail(s.error());
  return storage.remove_tree(entry_key);
}

} // namespace npc::cache
