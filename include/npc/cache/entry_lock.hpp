#pragma once
// The lock of one cache entry, held while it is compiled or changed. Two
// parts, taken in this order and given back in reverse:
//
//  1. flock(2) on npc-compile.lock: excludes our own processes on this host,
//     and the kernel drops it the moment a holder dies, even by SIGKILL.
//  2. torch-neuronx's existence lock, model.hlo_module.pb.lock, created with
//     O_CREAT|O_EXCL (atomic on NFS and Lustre too, unlike flock). The
//     framework takes the same file while it compiles and waits while it
//     exists, so while we hold it a training run beside us waits for our
//     compile instead of compiling the graph a second time. We write owner
//     facts into it (host, boot id, pid, process start, time); the framework
//     writes none.
//
// A framework lock that exists is respected unless it is provably stale:
//  - its owner facts name this host and the owner is gone (dead pid, pid
//    reused by a later process, or a reboot since), or
//  - it is older than the stale-lock age (the lock timeout) and its owner
//    cannot be proved alive: no owner facts (the framework's), garbage, or
//    another host's.
// A stale lock is broken by renaming it away and checking that what moved is
// the file that was judged, so two breakers never remove a fresh lock.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/stat.h>

#include <npc/util/file_lock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// A lock without a provably live owner older than this is stale. Large graphs
// compile for hours; a framework lock left by a compile killed with -9 blocks
// the framework forever, so it must end some time: past this age a compile
// of ours takes the entry over. `--lock-timeout` changes it.
inline constexpr auto kDefaultStaleLockAge = std::chrono::hours(6);

enum class FrameworkLockState {
  absent,
  held_alive,  // owner facts of a live process on this host
  held,        // no way to prove its owner dead, and younger than the stale age
  stale_dead,  // its owner on this host is gone
  stale_old    // older than the stale age and its owner not provably alive
};
[[nodiscard]] std::string_view to_string(FrameworkLockState state);

struct FrameworkLockFacts {
  FrameworkLockState state = FrameworkLockState::absent;
  std::optional<util::LockHolder> owner; // nullopt: no (readable) owner facts
  double age_seconds = 0;
  struct timespec mtime {}; // of the file judged: a replacement is told by it
  [[nodiscard]] bool blocks() const {
    return state == FrameworkLockState::held_alive || state == FrameworkLockState::held;
  }
  // "held by pid 12 on h (neuron_cc_wrapper), since ..." / "without owner facts, 42s old"
  [[nodiscard]] std::string describe() const;
};

// Judges the framework lock at `path` (an entry's model.hlo_module.pb.lock).
[[nodiscard]] FrameworkLockFacts judge_framework_lock(const fs::path& path,
                                                      std::chrono::seconds stale_age,
                                                      std::chrono::system_clock::time_point now);

// Removes a stale framework lock if it is still the one judged (same inode).
// True when it was removed.
[[nodiscard]] bool break_framework_lock(const fs::path& path, const FrameworkLockFacts& judged);

class EntryLock {
public:
  EntryLock() = default;
  ~EntryLock();
  EntryLock(EntryLock&& other) noexcept;
  EntryLock& operator=(EntryLock&& other) noexcept;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

  enum class Outcome { taken, held_elsewhere };
  struct Attempt {
    Outcome outcome = Outcome::held_elsewhere;
    FrameworkLockFacts blocking; // what held it, when held elsewhere by the framework lock
  };
  // Tries once to take both parts; breaks a stale framework lock on the way.
  [[nodiscard]] static Result<Attempt> try_acquire(const fs::path& entry_dir, const util::LockHolder& me,
                                                   std::chrono::seconds stale_age, EntryLock& out);

  [[nodiscard]] bool held() const { return flock_.held(); }
  // Removes our framework lock (if it is still ours), then drops the flock.
  void release();

private:
  util::FileLock flock_;
  fs::path framework_lock_;
  // Identity of the lock file we created: an inode is reused at once after
  // a removal, so its change time (ns) goes with it.
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  struct timespec ctime_ {};
};

} // namespace npc::cache
