#pragma once
// The persistent cache: the only way our programs touch it.
//
// An entry is a directory; its state follows from which files it holds:
//   done    model.done (written last) and model.neff
//   locked  a compile holds npc-compile.lock, or model.hlo_module.pb.lock
//           exists and is not provably stale (entry_lock.hpp)
//   failed  model.log and no model.done
//   pending the graph, no result
// Everything is published by rename of a temp file in the same directory;
// model.done comes last, so a reader that sees it sees a whole NEFF.
// Last use is the later of the entry directory's mtime, set on every hit of
// ours, and the NEFF's atime (the framework reads entries without telling us).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry_lock.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/trust.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

enum class EntryState { pending, locked, done, failed, incomplete };
[[nodiscard]] std::string_view to_string(EntryState state);

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
  bool has_lock_file = false;      // npc-compile.lock
  FrameworkLockFacts framework_lock; // model.hlo_module.pb.lock
  std::uint64_t graph_bytes = 0;
  std::vector<std::string> temp_files; // names of our temp files in the entry
};

// How a NEFF read compared with its integrity record.
enum class Integrity { ok, mismatch, unverified /* no record: written by another tool */ };

class Cache {
public:
  // The trust mode comes from the environment (see trust.hpp).
  explicit Cache(fs::path root, const util::Clock& clock = util::SystemClock::instance());
  Cache(fs::path root, TrustMode trust, const util::Clock& clock = util::SystemClock::instance());

  [[nodiscard]] const fs::path& root() const { return root_; }
  [[nodiscard]] const util::Clock& clock() const { return clock_; }
  [[nodiscard]] fs::path entry_dir(const CacheKey& key) const { return root_ / key.relative_path(); }
  [[nodiscard]] fs::path private_dir() const;

  // Creates the root (0700, or 2770 for a shared cache) and our private
  // folder; an existing root must pass the trust check.
  [[nodiscard]] Status ensure_root() const;
  [[nodiscard]] TrustMode trust() const { return trust_; }

  // Past this age a lock whose owner cannot be proved alive is stale
  // (entry_lock.hpp); --lock-timeout sets it.
  void set_stale_lock_age(std::chrono::seconds age) { stale_lock_age_ = age; }
  [[nodiscard]] std::chrono::seconds stale_lock_age() const { return stale_lock_age_; }

  [[nodiscard]] Result<EntryInfo> inspect(const fs::path& entry_dir) const;
  // Every entry of every compiler version, in no particular order.
  [[nodiscard]] std::vector<EntryInfo> list() const;
  // Every entry of one compiler version.
  [[nodiscard]] std::vector<EntryInfo> list_version(const std::string& compiler_version) const;

  // Copies the entry's NEFF to `output` (atomically), hashing it on the way
  // and checking it against the integrity record. On a mismatch nothing is
  // left at `output`. An entry that fails the trust check is an error.
  [[nodiscard]] Result<Integrity> copy_neff(const fs::path& entry_dir, const fs::path& output) const;
  // Hashes the NEFF and checks it against the record, copying nothing.
  [[nodiscard]] Result<Integrity> verify_neff(const fs::path& entry_dir) const;

  // Records a use: sets the entry directory's mtime to now.
  [[nodiscard]] Status touch(const fs::path& entry_dir) const;

  // Creates the entry with its graph and compile_flags.json, unless they are
  // already there (many ranks store the same graph at once: first one wins).
  [[nodiscard]] Status store_graph(const fs::path& entry_dir, std::string_view graph_bytes,
                                   const std::vector<std::string>& flags) const;

  [[nodiscard]] fs::path lock_path(const fs::path& entry_dir) const;
  [[nodiscard]] fs::path framework_lock_path(const fs::path& entry_dir) const;
  // Takes the entry's lock (both parts, see entry_lock.hpp), waiting with a
  // short random backoff up to `timeout`; the failure names the holder.
  // `on_wait` is called once, when the first attempt finds it held.
  [[nodiscard]] Result<EntryLock>
  lock_entry(const fs::path& entry_dir, std::chrono::milliseconds timeout,
             const std::function<void(const std::string& holder)>& on_wait = {}) const;
  // One attempt; nullopt when another process holds the entry.
  [[nodiscard]] Result<std::optional<EntryLock>> try_lock_entry(const fs::path& entry_dir) const;

  // The following require the entry's lock.
  // Moves `neff` (a file on the same filesystem) into the entry, records its
  // integrity and the attempt, writes model.done last, removes model.log.
  [[nodiscard]] Status publish_success(const fs::path& entry_dir, const fs::path& neff,
                                       const AttemptRecord& attempt) const;
  // Moves `log` into the entry as model.log and records the attempt.
  [[nodiscard]] Status publish_failure(const fs::path& entry_dir, const fs::path& log,
                                       const AttemptRecord& attempt) const;
  // Records a killed attempt and keeps its log as npc-killed.log; the entry
  // stays pending (no model.log), so no later run takes it for a failure.
  [[nodiscard]] Status record_killed(const fs::path& entry_dir, const fs::path& log,
                                     const AttemptRecord& attempt) const;
  // Back to pending: the done marker first, then the NEFF and its record.
  [[nodiscard]] Status demote(const fs::path& entry_dir) const;
  // Forgets a cached failure so the graph compiles again.
  [[nodiscard]] Status clear_failure(const fs::path& entry_dir) const;

  // Removes a whole entry: renamed into the trash first, so no reader ever
  // sees half of it. Skipped (false) when a compile holds its lock or any
  // framework lock file is there (even a stale one: removing an entry is
  // never urgent enough to break a lock).
  [[nodiscard]] Result<bool> remove_entry(const fs::path& entry_dir) const;
  // Empties the trash left by an interrupted removal.
  void empty_trash() const;

private:
  fs::path root_;
  TrustMode trust_;
  const util::Clock& clock_;
  std::chrono::seconds stale_lock_age_ = std::chrono::duration_cast<std::chrono::seconds>(kDefaultStaleLockAge);
};

// The tool name written into lock records by this process.
void set_lock_tool_name(std::string name);
[[nodiscard]] const std::string& lock_tool_name();

} // namespace npc::cache
