#pragma once
// The one order in which an entry's result is published, over any storage
// (a directory, an S3 bucket), with the entry's lock held. Readers trust
// model.done: whoever sees it sees a whole NEFF and its record.
//
//   graph, flags  placed only where the entry lacks them (first writer wins)
//   success       model.done removed first (a NEFF it vouched for is about
//                 to change), the NEFF, its record, model.done last; then
//                 model.log and npc-killed.log go
//   failure       the record, then model.log
//   demote        the reverse of a success: model.done first, then the NEFF;
//                 the record keeps its history without the NEFF's hash
//   remove        the whole entry, model.done first where a folder cannot
//                 vanish at once
//
// Each file is placed atomically for readers (a rename in a directory, a
// single PUT on S3); the order across files is what makes the entry safe.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

// The marker a result is trusted by: written last, removed first. No other
// file names it; the rest of the code asks the functions below.
inline constexpr std::string_view kDoneFile = "model.done";

// --- what the marker says ------------------------------------------------------
// Whether a file name in an entry's folder is the marker (a listing).
[[nodiscard]] bool is_done_marker(std::string_view name);
// The hot path's look at an entry in a directory: the marker and the NEFF
// are regular files (two stats, no lock, no read).
[[nodiscard]] bool looks_done_at(const std::filesystem::path& entry_dir);
// A cached failure in a directory: model.log and no marker (neither followed
// through a symlink).
[[nodiscard]] bool looks_failed_at(const std::filesystem::path& entry_dir);
// The marker's path in an entry directory, for a reader that checks it did
// not change while it read the entry's other files (Entry::open_snapshot).
[[nodiscard]] std::filesystem::path done_marker_at(const std::filesystem::path& entry_dir);

// --- writing -------------------------------------------------------------------

// Local files to move into an entry (each is gone afterwards), and its record.
// (Each member has an initialiser, so that a designated initialiser may
// name only some: g++ warns otherwise.)
struct EntryResult {
  std::optional<std::filesystem::path> graph{};
  std::optional<std::filesystem::path> flags{};
  std::optional<std::filesystem::path> neff{}; // a success
  std::optional<std::filesystem::path> log{};  // a failure (ignored with a NEFF)
  std::optional<std::string> record{};         // npc-entry.json's text; absent: left as it is
};

// What the entry may hold that a success removes. A caller that has just
// listed the entry says what is not there, which saves a request per file
// on an object store.
struct MayHold {
  bool done = true;
  bool log = true;
  bool killed_log = true;
};

[[nodiscard]] Status publish_result(storage::Storage& storage, std::string_view entry_key,
                                    const EntryResult& result, MayHold may_hold = {});

// Takes a done entry back to pending (its graph stays), with its lock held.
// An entry without a record (another tool's) gets none; a corrupt record
// goes, since nothing in it can be trusted.
[[nodiscard]] Status demote_result(storage::Storage& storage, std::string_view entry_key);

// Removes the whole entry, its model.done first (storage::Storage::remove,
// then remove_tree): where a folder cannot vanish at once (an object store),
// a reader meanwhile sees an entry that is not done, never a done entry
// without its NEFF. False when nothing was there but, at most, model.done.
// With its lock held, or none to hold (a lock's file goes too).
[[nodiscard]] Result<bool> remove_entry(storage::Storage& storage, std::string_view entry_key);

} // namespace npc::cache
