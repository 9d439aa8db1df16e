#pragma once
// A cache kept in an object store (s3://bucket/prefix, in libneuronxla's
// layout: <prefix>/neuronxcc-<version>/MODULE_.../<file>, one object per
// file) is used through a local mirror: an ordinary local cache (store.hpp)
// where graphs are compiled, NEFFs verified and hits served. The remote is
// what every node shares; the mirror is this machine's copy of the part it
// used. Nothing here keeps the two in step on its own: callers fetch what
// they need and push what they made.
//
//   fetch_result  a remote result into the mirror, verified (tier_fetch.hpp,
//                 as the secondary tier's), and its use recorded there for
//                 the remote's eviction. A cached failure is copied as one.
//   fetch_graph   a remote entry's graph and flags into the mirror, for a
//                 compile there (what the launcher does with the graphs a
//                 trial run extracted to S3).
//   push          a mirror entry's result to the remote in the one order
//                 that keeps every reader safe (publish.hpp, as a local
//                 entry's): an upload killed midway leaves an entry that is
//                 not done.
//
// Requests (S3): fetch_result of a miss is 1 LIST of the entry's folder;
// of a done entry 1 LIST, 2 to 5 GETs (record, NEFF, graph and flags when
// the mirror lacks them) and 1 PUT (the use). push of a done entry is 1 LIST, a HEAD and a PUT
// for each of graph and flags the remote lacks, 3 PUTs (NEFF, record, marker)
// and a DELETE for a marker or model.log already there.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tier_fetch.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

// Whether a fetch counts as a use of the remote entry (its npc-last-use
// object, which remote eviction orders by): a lookup does; an export, which
// only copies the entry out, does not.
enum class RecordUse { yes, no };

class RemoteCache {
public:
  RemoteCache(std::shared_ptr<storage::Storage> remote, const Cache& mirror)
      : remote_(std::move(remote)), mirror_(mirror) {}

  [[nodiscard]] const std::shared_ptr<storage::Storage>& storage() const { return remote_; }
  [[nodiscard]] const Cache& mirror() const { return mirror_; }
  // The remote entry as users name it: s3://bucket/prefix/neuronxcc-.../MODULE_...
  [[nodiscard]] std::string describe(const CacheKey& key) const;

  // See above. Waits up to `lock_wait` for the mirror entry's lock. Errors
  // are the remote's (unreachable, denied) or the mirror's (not writable).
  [[nodiscard]] Result<FetchResult> fetch_result(const CacheKey& key, std::chrono::milliseconds lock_wait,
                                                  RecordUse record = RecordUse::yes) const;
  // False when the remote has no graph for `key`.
  [[nodiscard]] Result<bool> fetch_graph(const CacheKey& key) const;
  // The mirror entry must be done or failed; anything else pushes nothing.
  [[nodiscard]] Status push(const CacheKey& key) const;
  // As push, but a result the remote has already stays: false, and nothing
  // written, when the remote entry is done, or failed and ours failed too
  // (what an import does; the first result stays, as in a local cache).
  [[nodiscard]] Result<bool> push_unless_there(const CacheKey& key) const;
  // The graph and flags of a new entry, straight to the remote (first writer
  // wins, as Entry::store_graph): what extraction does with an S3 cache.
  [[nodiscard]] Status store_graph(const CacheKey& key, std::string_view graph_bytes,
                                   const std::vector<std::string>& flags) const;

  // Records a use of the remote entry now (its npc-last-use object, which
  // remote eviction orders by; store.hpp, eviction.hpp): fetch_result does
  // it for every done result it finds, downloaded or already in the mirror.
  void record_use(const CacheKey& key) const;

  // Whether fetch_result found this entry's result in the remote unusable
  // (its NEFF failing its record, or a record that cannot be read): said
  // once, and push then replaces that result instead of trusting its record.
  [[nodiscard]] bool rejected(const CacheKey& key) const { return rejected_.contains(key.str()); }

  // The entry's lock in the remote (storage/lock.hpp): one attempt, and a
  // lock taken is renewed while held; judging it without taking it.
  [[nodiscard]] Result<storage::Lock::TakenOrHeld> try_lock(const CacheKey& key) const;
  [[nodiscard]] Result<storage::LockFacts> judge_lock(const CacheKey& key) const;

private:
  [[nodiscard]] std::string key_of(const CacheKey& key, std::string_view file) const;
  // push (keep_theirs false) and push_unless_there (true).
  [[nodiscard]] Result<bool> push_with(const CacheKey& key, bool keep_theirs) const;

  std::shared_ptr<storage::Storage> remote_;
  const Cache& mirror_;
  mutable std::set<std::string> rejected_; // CacheKey::str() of results found unusable
};

} // namespace npc::cache
