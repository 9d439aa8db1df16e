#pragma once
// Moving whole entries between caches without libarchive: reading an entry's
// files consistently without writing anything (bundle export and the
// read-only secondary tier), and publishing files prepared elsewhere into a
// local entry (bundle import and the secondary tier). Kept apart from
// bundle.hpp so that the compile entry, which uses the secondary tier, does
// not load libarchive on every start.

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// The files that make up an entry when it moves between caches (model.done
// never moves: the receiver writes it last, itself).
inline constexpr std::array<std::string_view, 5> kTransferFiles = {kGraphFile, kFlagsFile, kNeffFile,
                                                                   kLogFile, kMetaFile};

// --- reading an entry without writing to it ----------------------------------

// An entry's files opened read-only, all from one published state of it: the
// files were opened between two looks at model.done that found the same
// file, and each still was the file at its name at the second look. Files are
// replaced only by rename, so the descriptors keep those contents for as long
// as they are open, whatever happens to the entry meanwhile. Nothing in the
// entry is written, locked or touched (its directory's mtime is unchanged).
struct EntrySnapshot {
  bool done = false;   // model.done and model.neff
  bool failed = false; // model.log without model.done
  std::map<std::string, util::UniqueFd, std::less<>> files; // known bundle files present
};
// Fails when the entry cannot be read or kept changing while it was read.
[[nodiscard]] Result<EntrySnapshot> open_entry_snapshot(const fs::path& entry_dir);

// --- publishing files prepared elsewhere ------------------------------------

// Files on the cache's filesystem (a staging folder) to move into an entry,
// and the record to keep. The caller holds the entry's lock and has checked
// that the entry is not done.
struct IncomingEntry {
  std::optional<fs::path> graph;
  std::optional<fs::path> flags;
  std::optional<fs::path> neff; // a done entry: NEFF, record, model.done last
  std::optional<fs::path> log;  // a failed entry: model.log last
  std::string neff_sha256;      // verified by the caller
  std::uint64_t neff_bytes = 0;
  std::vector<AttemptRecord> attempts; // the producer's history, appended to ours
};
// Checks the entry and its version folder, where they exist, against the
// cache's trust mode (trust.hpp): a symlinked or foreign-owned one is refused
// before anything is locked or written there.
[[nodiscard]] Status check_entry_trust(const Cache& cache, const fs::path& entry_dir);
// Graph and flags are kept when the entry has them already (first writer
// wins); a done entry gets its NEFF, then npc-entry.json with the integrity
// record, then model.done, and loses any model.log; the entry is marked used.
[[nodiscard]] Status publish_incoming(const Cache& cache, const fs::path& entry_dir,
                                      const IncomingEntry& incoming);

} // namespace npc::cache
