#pragma once
// One cache entry: the only code that knows which files make an entry, what
// state they put it in, and in which order they are written. Everything that
// reads or changes an entry (the compile entry, the launcher, the secondary
// tier, bundle import, eviction, maintenance) goes through this class.
//
// States, from the files the entry holds (layout.hpp names them):
//   absent      no directory
//   incomplete  no graph or no compile_flags.json (a writer died, or only
//               our private files are left)
//   pending     graph and flags, no result: waiting to be compiled; with
//               npc-killed.log, an attempt was killed and left it pending
//   locked      model.hlo_module.pb.lock exists and is not stale
//               (storage/lock.hpp), or an older release of ours holds
//               npc-compile.lock
//   done        model.done (written last) and model.neff; a NEFF that fails
//               its integrity record is corrupt (verify_neff)
//   failed      model.log and no model.done: a cached compile failure
//
// The publish sequence (with the entry's lock held):
//   success   as publish.hpp orders it, for every storage: model.done goes
//             first, the NEFF is moved in, its integrity record written,
//             model.done created last; model.log and npc-killed.log go. A
//             reader that sees model.done sees a whole NEFF.
//   failure   the attempt recorded, model.log moved in (publish.hpp).
//   killed    the attempt recorded, its log kept as npc-killed.log; the entry
//             stays pending (a kill says nothing about the graph).
//   demote    model.done first, then the NEFF and its record: back to pending.
// Everything is published by rename of a file on the cache's filesystem.
// Last use is the later of the entry directory's mtime, set on every hit of
// ours, and the NEFF's atime (the framework reads entries without telling us).

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/result.hpp>

struct stat; // <sys/stat.h>

namespace npc::cache {

class Cache;

enum class EntryState { absent, incomplete, pending, locked, done, failed };
[[nodiscard]] std::string_view to_string(EntryState state);

// One state of a directory: its inode and its ctime (summary.hpp).
struct DirStamp {
  std::uint64_t inode = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const DirStamp&) const = default;
};
[[nodiscard]] DirStamp dir_stamp_of(const struct stat& st);

struct EntryInfo {
  CacheKey key;
  fs::path dir;
  EntryState state = EntryState::incomplete;
  std::uint64_t bytes = 0;
  util::WallTime last_used;
  bool has_graph = false;
  bool has_flags = false;
  bool has_neff = false;
  bool has_done = false;
  bool has_log = false;
  bool has_killed_log = false;     // npc-killed.log: an attempt was killed
  bool has_lock_file = false;      // npc-compile.lock: an older release's flock
  storage::LockFacts framework_lock; // model.hlo_module.pb.lock
  std::uint64_t graph_bytes = 0;
  std::uint64_t neff_bytes = 0;
  std::vector<std::string> temp_files; // names of our temp files in the entry
  DirStamp dir_stamp;                  // the directory when it was read
};

// The state the files make, for an entry whose lock (if any) is `locked`.
[[nodiscard]] EntryState state_from_files(const EntryInfo& entry, bool locked);

// How a NEFF read compared with its integrity record.
enum class Integrity { ok, mismatch, unverified /* no record: written by another tool */ };

// The files that make up an entry when it moves between caches (model.done
// never moves: the receiver writes it last, itself).
inline constexpr std::array<std::string_view, 5> kTransferFiles = {kGraphFile, kFlagsFile, kNeffFile,
                                                                   kLogFile, kMetaFile};

// An entry's files opened read-only, all from one published state of it: the
// files were opened between two looks at model.done that found the same
// file, and each still was the file at its name at the second look. Files are
// replaced only by rename, so the descriptors keep those contents for as long
// as they are open, whatever happens to the entry meanwhile. Nothing in the
// entry is written, locked or touched (its directory's mtime is unchanged).
struct EntrySnapshot {
  bool done = false;   // model.done and model.neff
  bool failed = false; // model.log without model.done
  std::map<std::string, util::UniqueFd, std::less<>> files; // known transfer files present
};

// Files on the cache's filesystem (a staging folder) to move into an entry,
// and the record to keep: what bundle import and the secondary tier publish.
struct IncomingEntry {
  std::optional<fs::path> graph;
  std::optional<fs::path> flags;
  std::optional<fs::path> neff; // a done entry: NEFF, record, model.done last
  std::optional<fs::path> log;  // a failed entry: model.log last
  std::string neff_sha256;      // verified by the caller
  std::uint64_t neff_bytes = 0;
  std::vector<AttemptRecord> attempts; // the producer's history, appended to ours
};

// Why a wait for an entry's lock ended without it.
struct LockBusy {
  std::string holder; // "pid 12 on host (neuron_cc_wrapper)", "the lock ... without owner facts"
  std::chrono::milliseconds waited{0}; // the timeout that ran out (zero: one attempt)
};
// An entry taken with EntryDir::must_exist that is gone: removed (evicted,
// `neuron_cache rm`) before or while its lock was waited for. Told apart from
// an error: it may be back by the time anyone looks again (another process
// stored its graph anew), and what was asked for still stands.
struct EntryGone {};
// "timed out after 2.0s waiting for DIR, held by ... (if nothing is compiling
// it, remove the lock with neuron_cache clear-locks)"
[[nodiscard]] std::string describe_busy(const fs::path& entry_dir, const LockBusy& busy);

// One entry's files go through the storage it lives in (storage/storage.hpp):
// the cache's own, or for an entry under another root (where the framework
// put a graph) a local storage over that entry's folder. In a cache that is
// no directory (Cache::is_directory), `dir` is the entry's key. How an
// entry is looked at (inspect, verify_neff) is the cache's reading way
// (reading_way.hpp). Snapshots, copy_neff and the path accessors are for
// entries in a directory.
class Entry {
public:
  Entry(const Cache& cache, fs::path dir);
  // An entry at `key` of the cache's storage, `dir` its local path.
  Entry(const Cache& cache, fs::path dir, std::string key);

  // The same entry through another connection to the cache's storage (for
  // work shared out over connections: Cache::share_out).
  [[nodiscard]] Entry through(std::shared_ptr<storage::Storage> connection) const;

  [[nodiscard]] const fs::path& dir() const { return dir_; }
  [[nodiscard]] const Cache& cache() const { return cache_; }
  // The storage the entry's files are in, its folder's key there, and the
  // key of one of its files.
  [[nodiscard]] const std::shared_ptr<storage::Storage>& storage() const { return storage_; }
  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] std::string key_of(std::string_view file) const { return key_ + "/" + std::string(file); }
  [[nodiscard]] fs::path graph_path() const { return dir_ / kGraphFile; }
  [[nodiscard]] fs::path neff_path() const { return dir_ / kNeffFile; }
  [[nodiscard]] fs::path log_path() const { return dir_ / kLogFile; }
  [[nodiscard]] fs::path killed_log_path() const { return dir_ / kKilledLogFile; }
  [[nodiscard]] fs::path lock_path() const { return dir_ / kLockFile; }

  // --- looking, without writing ---------------------------------------------
  // Every file, its state, size and last use (one directory read).
  [[nodiscard]] Result<EntryInfo> inspect() const;
  // Who holds the entry now, to follow "held by": "pid 12 on h (tool), since
  // <time> (the lock <path>, 3.0s old)", "whoever made the lock <path>, 3.0s
  // old (it names no owner)", "pid 12 on h (neuron_cc_wrapper), since
  // <time>"; nullopt when neither lock is held now.
  [[nodiscard]] std::optional<std::string> describe_holder() const;
  // As describe_holder, with the holder alone beside it: "pid 12 on h
  // (tool), since <time>", the same for every entry it holds (so that a
  // holder's entries are counted together); nullopt when the lock names
  // no owner.
  struct Holder {
    std::optional<std::string> owner;
    std::string described; // describe_holder()'s text
  };
  [[nodiscard]] std::optional<Holder> holder() const;
  // The hot path's look: model.done and model.neff are there (two stats, no
  // lock, no read). looks_done_at looks at any cache's entry (a secondary's).
  [[nodiscard]] bool looks_done() const { return looks_done_at(dir_); }
  [[nodiscard]] static bool looks_done_at(const fs::path& entry_dir);
  // A cached failure: model.log and no model.done.
  [[nodiscard]] bool looks_failed() const;
  // Hashes the NEFF and checks it against the record, copying nothing (a
  // storage's NEFF is downloaded to a scratch folder). An error is the
  // entry's (a corrupt record, no NEFF); a storage that cannot be read
  // throws EnvironmentError.
  [[nodiscard]] Result<Integrity> verify_neff() const;
  // Copies the NEFF to `output` (atomically), hashing it on the way and
  // checking it against the integrity record. On a mismatch nothing is left
  // at `output`. An entry that fails the trust check is an error.
  [[nodiscard]] Result<Integrity> copy_neff(const fs::path& output) const;
  // See EntrySnapshot. Fails when the entry cannot be read or kept changing
  // while it was read. Works on any cache's entry (a secondary's too).
  [[nodiscard]] static Result<EntrySnapshot> open_snapshot(const fs::path& entry_dir);
  // The entry and its version folder, where they exist, against the cache's
  // trust mode (trust.hpp): a symlinked or foreign-owned one is refused
  // before anything is locked or written there.
  [[nodiscard]] Status check_trust() const;

  // --- writing without the lock ---------------------------------------------
  // Records a use: sets the entry directory's mtime to now.
  [[nodiscard]] Status touch() const;
  // Creates the entry with its graph and compile_flags.json, unless they are
  // already there (many ranks store the same graph at once: first one wins).
  [[nodiscard]] Status store_graph(std::string_view graph_bytes, const std::vector<std::string>& flags) const;

  // --- the lock ----------------------------------------------------------------
  // Takes the entry's lock (storage/lock.hpp), renewed while held, waiting with a
  // short random backoff up to `timeout` (zero: one attempt). `on_wait` is
  // called once, when the first attempt finds it held. An error is a cache
  // that cannot be written; LockBusy is a holder that kept it; EntryGone,
  // only with EntryDir::must_exist, an entry that went.
  // must_exist is for taking a lock on an entry someone else made: creating
  // its folder again would bring back, empty, an entry another process just
  // removed (neuron_cache rm, --command clean) and hide that it did.
  enum class EntryDir { create, must_exist };
  using LockOrBusy = std::variant<storage::Lock, LockBusy, EntryGone>;
  [[nodiscard]] Result<LockOrBusy>
  lock(std::chrono::milliseconds timeout,
       const std::function<void(const std::string& holder)>& on_wait = {},
       EntryDir entry_dir = EntryDir::create) const;
  // One attempt, for a short change (not renewed); nullopt when another
  // process holds the entry.
  [[nodiscard]] Result<std::optional<storage::Lock>> try_lock() const;

  // --- publishing: each requires the entry's lock -------------------------------
  // Moves `neff` (a file on the cache's filesystem) into the entry; see above.
  [[nodiscard]] Status publish_success(const fs::path& neff, const AttemptRecord& attempt) const;
  [[nodiscard]] Status publish_failure(const fs::path& log, const AttemptRecord& attempt) const;
  [[nodiscard]] Status record_killed(const fs::path& log, const AttemptRecord& attempt) const;
  // Files prepared elsewhere: graph and flags are kept when the entry has
  // them already (first writer wins); a done entry gets its NEFF through the
  // success sequence, a failed one its model.log; the entry is marked used.
  [[nodiscard]] Status publish_incoming(const IncomingEntry& incoming) const;
  [[nodiscard]] Status demote() const;
  // Forgets a cached failure so the graph compiles again.
  [[nodiscard]] Status clear_failure() const;

  // Removes the whole entry: renamed into the cache's trash first, so no
  // reader ever sees half of it. Skipped (false) when a compile holds its
  // lock or any framework lock file is there (even a stale one: removing an
  // entry is never urgent enough to break a lock).
  [[nodiscard]] Result<bool> remove() const;

private:
  // The entry's folder is there (a storage's: it has a file).
  [[nodiscard]] bool exists() const;
  // One attempt at the lock.
  [[nodiscard]] Result<storage::Lock::TakenOrHeld> take_lock(const util::LockHolder& me) const;
  // The success sequence for a NEFF already hashed.
  [[nodiscard]] Status publish_neff(const fs::path& neff, const std::string& sha256, std::uint64_t bytes,
                                    EntryMeta record) const;
  [[nodiscard]] EntryMeta record_or_empty() const;

  const Cache& cache_;
  fs::path dir_;
  std::shared_ptr<storage::Storage> storage_;
  std::string key_;
};

} // namespace npc::cache
