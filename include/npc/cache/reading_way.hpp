#pragma once
// The two ways a cache is read, one chosen where the cache is made
// (store.hpp), so that listing, counting and looking at one entry never ask
// which storage the cache is in:
//  - a directory, read in place: entry by entry, helped by a summary per
//    compiler version kept in its private folder (summary.hpp), so that a
//    settled entry costs two stats, not a folder read; an entry is one
//    folder read, its NEFF hashed where it lies (directory_reading.cpp);
//  - any other storage, through its requests: the whole cache in one walk
//    of every file below the root (Storage::list_tree; S3: one LIST per 1000
//    objects), each entry's last use its folder's time where the walk holds
//    one, else its newest file's; only the entries with a lock object cost
//    a read more, to judge the lock; an entry is a listing of its folder,
//    its NEFF downloaded to a scratch folder to be hashed
//    (stored_reading.cpp).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::cache {

class Cache;
class Entry;
struct CacheKey;
struct CacheCensus;
struct EntryInfo;
enum class Integrity;

class ReadingWay {
public:
  virtual ~ReadingWay() = default;
  // Every entry of every compiler version, in no particular order.
  [[nodiscard]] virtual std::vector<EntryInfo> list(const Cache& cache) const = 0;
  // Every entry of one compiler version.
  [[nodiscard]] virtual std::vector<EntryInfo> list_version(const Cache& cache,
                                                            const std::string& compiler_version) const = 0;
  // What list() would find, counted.
  [[nodiscard]] virtual CacheCensus census(const Cache& cache) const = 0;
  // `entry`, as listed in `listed`, as it is now (before it is removed:
  // it may have been used or locked since). A directory recalls a settled
  // entry by two stats, and counts one it cannot read as gone (absent); a
  // stored cache's errors are the caller's.
  [[nodiscard]] virtual Result<EntryInfo> look_again(const Cache& cache, const Entry& entry,
                                                     const EntryInfo& listed) const = 0;

  // One entry: Entry::inspect, Entry::verify_neff.
  [[nodiscard]] virtual Result<EntryInfo> inspect(const Entry& entry) const = 0;
  [[nodiscard]] virtual Result<Integrity> verify_neff(const Entry& entry) const = 0;
  // Whether the entry's folder is there (a stored cache's: it has a file;
  // one that cannot be listed counts as there, for its lock to say why).
  [[nodiscard]] virtual bool exists(const Entry& entry) const = 0;
  // A local folder with the graph, flags and record of the entry `key`, to
  // read as files (explain): a directory's entry folder itself, a stored
  // cache's files downloaded below `scratch`; nullopt without a graph. A
  // storage that cannot be read throws EnvironmentError.
  [[nodiscard]] virtual std::optional<std::filesystem::path>
  local_files(const Cache& cache, const CacheKey& key, const std::filesystem::path& scratch) const = 0;
};

[[nodiscard]] const ReadingWay& directory_reading();
[[nodiscard]] const ReadingWay& stored_reading();

} // namespace npc::cache
