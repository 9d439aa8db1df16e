#pragma once
// What the names of an entry's files say, without reading any of them: the
// one place that turns a folder listing (a readdir, or a LIST on S3) into an
// entry's facts. Entry::inspect reads one local entry through it; a listing
// of a whole cache on any storage groups its files into entries with it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

// The facts one file's name and size add to its entry's EntryInfo: which of
// the entry's files it is, and its bytes. A lock file only marks the lock as
// there (LockState::held); judging it is a read, left to the caller.
// `regular` is false for a directory or a symlink at a file's name, which
// counts as no such file.
void note_entry_file(EntryInfo& info, std::string_view name, std::uint64_t size, bool regular = true);

// What the names alone say: a folder listing, one LIST on S3.
struct ListedEntry {
  bool has_graph = false;
  bool done = false;              // model.done and model.neff
  bool failed = false;            // model.log without model.done
  bool done_without_neff = false; // damaged: model.done and no model.neff
  bool has_lock = false;          // a lock object, judged or not
};
[[nodiscard]] ListedEntry read_listing(const std::vector<std::string>& names);

// The entries of a tree listing (Storage::list_tree) of `folder` ("" for
// the root, or a version folder), sorted by key. Each EntryInfo has its key,
// `dir` its folder's key, its files' facts, its bytes and its last use: its
// folder's time where the listing holds one (TreeFile::folder_time), else
// the time of its newest file. Its lock, when there, is not judged and its
// state not set (state_from_files, once the lock is judged). Files that are
// not in an entry (our private folder, stray objects) are left out.
[[nodiscard]] std::vector<EntryInfo> entries_from_tree(const std::vector<storage::TreeFile>& files,
                                                       std::string_view folder);

} // namespace npc::cache
