#pragma once
// A summary of one compiler version's entries, so that listing a big cache
// (stats, ls, eviction) costs a stat of each entry directory, and of each
// NEFF, instead of reading every entry's directory and stating its files.
//
// A record describes an entry as one listing found it, with the directory's
// inode and ctime then. Anything that creates, removes or renames a file in
// the directory changes its ctime, which no program can set back; a
// directory removed and made again has a new inode. So a record whose
// inode and ctime still match describes the directory's files exactly, as
// ccache's per-level stats do for counters, but checked rather than trusted.
// What a directory's ctime cannot show is read fresh on every listing: the
// directory's mtime (our hits' mark of use) and the NEFF's size and atime
// (the framework's reads).
//
// Only settled entries get a record: no lock file, no framework lock, no
// temp file, and the last change of the directory at least the settle time
// before the listing began (measured on the file system's own clock, which
// on NFS may not be ours). A file written in place after its creation
// (the framework writes the graph, then creates compile_flags.json) is
// complete by then, so its size in the record is final.
//
// The file is `.npc/summary/neuronxcc-<version>`, replaced whole by rename.
// Any reader can write it; the last writer wins, and every record is checked
// on its own, so a summary written from an older listing is only slower,
// never wrong. An absent, foreign or malformed file reads as empty.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cache/trust.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr std::string_view kSummaryDir = "summary";
// A change to an entry younger than this when a listing begins is not
// recorded: a writer may still be filling a file it created.
inline constexpr std::chrono::seconds kSummarySettleTime{10};

// What a listing found in one settled entry.
struct SettledEntry {
  DirStamp stamp;
  std::uint32_t files = 0;            // which known files were there (bits, see summary.cpp)
  std::uint64_t bytes_besides_neff = 0; // every regular file but model.neff
  std::uint64_t graph_bytes = 0;
};

// A record that still holds, with what a record cannot know read fresh.
struct RecalledEntry {
  const SettledEntry* record = nullptr;
  util::WallTime last_used;
  std::uint64_t neff_bytes = 0;

  [[nodiscard]] EntryState state() const;
  [[nodiscard]] std::uint64_t bytes() const { return record->bytes_besides_neff + neff_bytes; }
  // The entry as inspect() would have described it.
  [[nodiscard]] EntryInfo info(CacheKey key, fs::path dir) const;
};

// Checks `module`'s record against its directory (in `version_fd`, the
// version directory, open, or AT_FDCWD and a path): nullopt when it no longer holds, and the
// caller inspects the entry. Two stats at most, nothing allocated.
[[nodiscard]] std::optional<RecalledEntry> recall_entry(int version_fd, std::string_view module,
                                                        const SettledEntry& record);

// The entry a listing found, looked at again (eviction does, just before
// it removes one): two stats when its directory is as listed and was last
// changed more than the settle time ago, else inspect().
[[nodiscard]] Result<EntryInfo> look_again(const Entry& entry, const EntryInfo& listed,
                                           std::chrono::nanoseconds settle_time = kSummarySettleTime);

// Whether a listing may record the entry it inspected.
[[nodiscard]] bool is_settled(const EntryInfo& entry);

class VersionSummary {
public:
  VersionSummary() = default;
  // Reads `file`; in a cache private to the user, a file of another owner
  // is ignored.
  [[nodiscard]] static VersionSummary load(const fs::path& file, TrustMode trust);

  // The record of each module, or null; `modules` in the listing's order.
  // A summary is written in that order, so a directory read in the same
  // order as last time is matched without hashing a name.
  [[nodiscard]] std::vector<const SettledEntry*> match(const std::vector<std::string>& modules) const;
  [[nodiscard]] std::size_t size() const { return records_.size(); }

private:
  // Names are kept as places in the text rather than views into it, so
  // that moving a summary (whose short text could live inside the string
  // object itself) cannot leave them pointing at the old one.
  struct Record {
    std::size_t name_at = 0, name_length = 0;
    SettledEntry entry;
  };
  [[nodiscard]] std::string_view name_of(const Record& r) const { return {text_.data() + r.name_at, r.name_length}; }

  std::string text_; // the file
  std::vector<Record> records_;
};

// A new summary of one version, begun when the listing begins: its temp
// file's creation time is the listing's start on the file system's clock.
class SummaryDraft {
public:
  SummaryDraft(fs::path file, std::chrono::nanoseconds settle_time);

  // Records one entry the listing inspected when it may be recorded.
  // Not thread-safe: called after the listing.
  void add(const std::string& module, const EntryInfo& entry);
  // Keeps a record the listing found still true.
  void keep(const std::string& module, const SettledEntry& record);
  // How many records were added (not kept).
  [[nodiscard]] std::size_t added() const { return added_; }
  // Replaces the summary with this one. A failure (a read-only cache) is
  // not an error of the listing: the next one is only slower.
  void commit();

private:
  util::AtomicFile file_;
  fs::path dir_;
  bool open_ = false;
  std::int64_t started_ns_ = 0;
  std::chrono::nanoseconds settle_time_;
  std::string text_;
  std::size_t count_ = 0;
  std::size_t added_ = 0;
};

} // namespace npc::cache
