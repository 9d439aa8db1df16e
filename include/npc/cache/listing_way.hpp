#pragma once
// The two ways a whole cache is listed, one chosen where the cache is made
// (store.hpp), so that listing and counting never ask which storage the
// cache is in:
//  - a directory, entry by entry, helped by a summary per compiler version
//    kept in its private folder (summary.hpp): a settled entry costs two
//    stats, not a folder read;
//  - any other storage, in one walk of every file below the root
//    (Storage::list_tree; S3: one LIST per 1000 objects), each entry's last
//    use its folder's time where the walk holds one, else its newest
//    file's; only the entries with a lock object cost a read more, to judge
//    the lock.

#include <string>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::cache {

class Cache;
class Entry;
struct CacheCensus;
struct EntryInfo;

class ListingWay {
public:
  virtual ~ListingWay() = default;
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
  // walked storage's errors are the caller's.
  [[nodiscard]] virtual Result<EntryInfo> look_again(const Cache& cache, const Entry& entry,
                                                     const EntryInfo& listed) const = 0;
};

[[nodiscard]] const ListingWay& directory_listing();
[[nodiscard]] const ListingWay& walked_listing();

} // namespace npc::cache
