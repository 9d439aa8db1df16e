#pragma once
// The shared tier of a cache: entries in a storage that every host shares
// (storage/storage.hpp: an S3 bucket, s3://bucket/prefix in libneuronxla's
// layout, <prefix>/neuronxcc-<version>/MODULE_.../<file>, one object per
// file; any other storage works alike, and the tests use a directory), used
// through this host's mirror: an ordinary local cache (store.hpp) where
// graphs are compiled, NEFFs verified and hits served. Nothing here keeps the
// two in step on its own: callers fetch what they need and push what they
// made.
//
//   fetch_result  a shared result into the mirror, verified (tier_fetch.hpp,
//                 as the secondary directory's), and its use recorded in
//                 the shared tier for its eviction. A cached failure is
//                 copied as one.
//   fetch_graph   a shared entry's graph and flags into the mirror, for a
//                 compile there (what the launcher does with the graphs a
//                 trial run extracted into the shared tier).
//   push          a mirror entry's result to the shared tier in the one
//                 order that keeps every reader safe (publish.hpp, as a
//                 local entry's): an upload killed midway leaves an entry
//                 that is not done.
//
// Requests on S3: fetch_result of a miss is 1 LIST of the entry's folder;
// of a done entry 1 LIST (none after a look that listed it), 2 to 5 GETs
// (record, NEFF, graph and flags when the mirror lacks them) and 1 PUT (the
// use). push of a done entry is 1 LIST, a HEAD and a PUT for each of graph
// and flags the shared tier lacks, 3 PUTs (NEFF, record, marker) and a
// DELETE for a marker or model.log already there.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <npc/cache/found.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tier_fetch.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

// Whether a fetch counts as a use of the shared entry (its npc-last-use
// object, which the shared tier's eviction orders by): a lookup does; an export, which
// only copies the entry out, does not.
enum class RecordUse { yes, no };

// Whether a look that finds a result brings it into the mirror.
enum class DownloadResult { yes, no };

// What SharedTier::bring did with one entry.
struct Brought {
  bool absent = false;     // the shared tier has no graph for it
  bool downloaded = false; // its result (or cached failure) came into the mirror
  bool uploaded = false;   // the mirror's result, which the shared tier lacked, went up
  std::optional<std::string> held_by; // pending, and its lock in force elsewhere: the holder
};

// The lock objects a watcher judged, by key, with what it read: a listing
// that shows the same object again (its size, its modification time within a
// second) is judged again from that, without reading it. A holder renews its
// lock every third of its time to live, which writes it anew: the watcher
// reads it once per renewal, not once per look.
//
// A watcher may also presume held, without reading it, a lock object written
// after it started and less than kPresumeHeldFor ago (presume_held_since):
// a lock is that young because its holder took or renewed it a moment ago.
// What that skips is a holder of this host that died within those seconds,
// or a record that expires sooner, whose lock is then taken over up to
// that much later; a lock left by a run before this one (a launcher killed
// and started again) is older than the watcher and read as before.
class LockMemo {
public:
  [[nodiscard]] std::optional<storage::LockFacts> find(const std::string& lock_key, std::uint64_t size,
                                                       storage::Time modified) const;
  void remember(const std::string& lock_key, const storage::LockFacts& facts);
  // What was read of the lock at `lock_key` no longer stands: the lock is
  // gone, or another object is there now.
  void forget(const std::string& lock_key);
  // When the lease of the lock at `lock_key`, as last read, ends unless
  // renewed; nullopt when the object there now was not read, or names no
  // expiry.
  [[nodiscard]] std::optional<storage::Time> lease_ends(const std::string& lock_key) const;
  void presume_held_since(storage::Time started) { presume_since_ = started; }
  // As presume_held_since(now), less kPresumeClockMargin: what a watcher
  // starting now calls.
  void presume_held_from_now();
  // Whether a lock object written at `modified`, not found in the memo, is
  // presumed held at `now`.
  [[nodiscard]] bool presumed_held(storage::Time modified, storage::Time now) const;

private:
  std::map<std::string, storage::LockFacts> judged_;
  std::optional<storage::Time> presume_since_;
};

// Short beside any lock's time to live (ours: 10 minutes), long beside most
// compiles' looks at a graph another host holds.
inline constexpr std::chrono::seconds kPresumeHeldFor{10};
// The store's clock (S3's LastModified) and ours are not the same clock: a
// lock written just before a watcher started counts as written since.
inline constexpr std::chrono::seconds kPresumeClockMargin{1};

// How look_all lists: one walk of the version folder for every entry, or a
// listing of each entry's folder (cheaper when few are looked at in a large
// cache).
enum class LookListing { whole_version_folder, each_entry };

class SharedTier {
public:
  SharedTier(std::shared_ptr<storage::Storage> shared, const Cache& mirror)
      : shared_(std::move(shared)), mirror_(mirror) {}

  [[nodiscard]] const std::shared_ptr<storage::Storage>& storage() const { return shared_; }
  [[nodiscard]] const Cache& mirror() const { return mirror_; }
  // The shared entry as users name it: s3://bucket/prefix/neuronxcc-.../MODULE_...
  [[nodiscard]] std::string describe(const CacheKey& key) const;

  // See above. Waits up to `lock_wait` for the mirror entry's lock. Errors
  // are the shared tier's (unreachable, denied) or the mirror's (not writable).
  // `listed`: the names in the shared entry's folder, when the caller has
  // just listed it (FetchOptions::listed).
  [[nodiscard]] Result<FetchResult> fetch_result(const CacheKey& key, std::chrono::milliseconds lock_wait,
                                                  RecordUse record = RecordUse::yes,
                                                  const std::vector<std::string>* listed = nullptr) const;
  // False when the shared tier has no graph for `key`. With `flags_json`
  // (the compile_flags.json of another entry whose flags hash to this key's,
  // so the same flags), only the graph is downloaded.
  [[nodiscard]] Result<bool> fetch_graph(const CacheKey& key,
                                         std::optional<std::string_view> flags_json = std::nullopt) const;
  // The mirror entry must be done or failed; anything else pushes nothing.
  [[nodiscard]] Status push(const CacheKey& key) const;
  // As push, over the shared entry's files as `listed` (Storage::list) under
  // the entry's lock this process holds: nothing else writes the entry
  // meanwhile, so the listing push would make first is spared.
  [[nodiscard]] Status push_over(const CacheKey& key, const std::vector<std::string>& listed) const;
  // As push, but a result the shared tier has already stays: false, and nothing
  // written, when the shared entry is done, or failed and ours failed too
  // (what an import does; the first result stays, as in a local cache).
  [[nodiscard]] Result<bool> push_unless_there(const CacheKey& key) const;
  // The push of the holder of the shared entry's `lock` (over `listed`, the
  // listing it made under the lock, when it has one). A lock whose lease
  // lapsed while this host could not renew it (cut off from the store) may
  // have been taken over and the graph compiled by another host meanwhile:
  // renewed now, it was not (the push goes on after a fresh listing);
  // otherwise the result goes up only where none is there, so the first
  // result stands, and true is returned only if it went up.
  [[nodiscard]] Result<bool> push_as_holder(const CacheKey& key, storage::Lock& lock,
                                            const std::vector<std::string>* listed = nullptr) const;
  // The graph and flags of a new entry, straight to the shared tier (first writer
  // wins, as Entry::store_graph): what extraction does with an S3 cache.
  [[nodiscard]] Status store_graph(const CacheKey& key, std::string_view graph_bytes,
                                   const std::vector<std::string>& flags) const;

  // Records a use of the shared entry now (its npc-last-use object, which
  // the shared tier's eviction orders by; store.hpp, eviction.hpp): fetch_result does
  // it for every done result it finds, downloaded or already in the mirror.
  void record_use(const CacheKey& key) const;

  // Whether fetch_result found this entry's result in the shared tier unusable
  // (its NEFF failing its record, or a record that cannot be read): said
  // once, and push then replaces that result instead of trusting its record.
  [[nodiscard]] bool rejected(const CacheKey& key) const { return rejected_.contains(key.str()); }

  // An entry of the shared tier brought into the mirror before the launcher
  // collects it (`names`: a listing of its folder there, just made): its
  // result when it has one (done, or a cached failure; not when the mirror
  // entry is busy or the result rejected); else a result the mirror has and
  // the shared tier lacks (an upload killed midway, a run while S3 was down)
  // uploaded under the shared entry's lock, since a hit in the mirror never
  // looks there, so this is where a host repairs what it failed to upload;
  // else its graph and flags, pending, and a lock object the listing showed
  // judged. Errors are the shared tier's (unreachable, denied) or the
  // mirror's, as text.
  [[nodiscard]] Result<Brought> bring(const CacheKey& key, const std::vector<std::string>& names) const;

  // The launcher's own look at a graph another host compiles (its mirror
  // entry pending, or not there yet): one LIST of the shared entry's folder, and
  //   model.done there     its result fetched into the mirror (unless
  //                        DownloadResult::no: left there): done
  //   model.log, no done   its cached failure likewise: failed (unless
  //                        `retry_failed`: then the lock decides, as for a
  //                        graph with no result)
  //   the lock object      a read of it: in force (unexpired, not of a dead
  //                        process of this host) is held
  //   otherwise            pending
  // A shared tier that cannot be read reads as pending (with a warning): the
  // compile that follows meets the same error and reports it with its log.
  // The mirror entry's lock is not waited for.
  [[nodiscard]] Found look(const CacheKey& key, bool retry_failed,
                                DownloadResult download = DownloadResult::yes) const;
  // look, for many entries of one compiler version at once: listed as
  // `listing` says, a lock object judged from `memo` when it is the one read
  // before. Requests: 1 LIST per 1,000 objects of the version folder, or 1
  // LIST per entry; a GET per lock object not in the memo.
  [[nodiscard]] std::vector<Found> look_all(const std::vector<CacheKey>& keys, bool retry_failed,
                                                 DownloadResult download, LockMemo& memo, LookListing listing) const;

  // look_all's judgement of entries of one version folder from a walk of
  // that folder made before (its list_tree): no LIST of its own.
  [[nodiscard]] std::vector<Found> look_in_walk(const std::vector<CacheKey>& keys,
                                                     const std::vector<storage::TreeFile>& walk, bool retry_failed,
                                                     DownloadResult download, LockMemo& memo) const;

  // The entry's lock in the shared tier (storage/lock.hpp): one attempt, and a
  // lock taken is renewed while held; judging it without taking it.
  [[nodiscard]] Result<storage::Lock::TakenOrHeld> try_lock(const CacheKey& key) const;
  [[nodiscard]] Result<storage::LockFacts> judge_lock(const CacheKey& key) const;
  // As try_lock, but a lock found there is neither read nor judged
  // (storage::Lock::try_create): nullopt then.
  [[nodiscard]] Result<std::optional<storage::Lock>> try_create_lock(const CacheKey& key) const;
  // The key of the entry's lock object (what a LockMemo remembers it by).
  [[nodiscard]] std::string lock_key(const CacheKey& key) const { return key_of(key, kFrameworkLockFile); }

private:
  [[nodiscard]] std::string key_of(const CacheKey& key, std::string_view file) const;
  // look's judgement of one entry from its listing.
  [[nodiscard]] Found judge_listed(const CacheKey& key, const std::vector<std::string>& names,
                                        const std::optional<storage::TreeFile>& lock, bool retry_failed,
                                        DownloadResult download, LockMemo& memo) const;
  // push (keep_theirs false) and push_unless_there (true); over `listed`
  // when given, else over a listing of the shared entry made first.
  [[nodiscard]] Result<bool> push_with(const CacheKey& key, bool keep_theirs,
                                       const std::vector<std::string>* listed = nullptr) const;

  std::shared_ptr<storage::Storage> shared_;
  const Cache& mirror_;
  mutable std::set<std::string> rejected_; // CacheKey::str() of results found unusable
};

} // namespace npc::cache
