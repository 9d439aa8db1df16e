#pragma once
// A cross-process lock on a file, with a record of who holds it.
//
// The lock itself is flock(2) on the lock file: the kernel drops it the
// moment the holder dies, even by SIGKILL, so a dead holder never blocks
// anyone and no guess about "stale" is needed for the lock itself. The
// file also records the holder (pid, host, start time, tool) so a waiter can
// name who it waits for, and `clear-locks` can tell a held lock from a file
// left behind. The holder unlinks the file on release, and an acquirer checks
// that the file it locked is still the one at the path (the classic
// flock-and-unlink race).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <npc/util/result.hpp>

namespace npc::util {

namespace fs = std::filesystem;

struct LockHolder {
  pid_t pid = 0;
  std::string host;
  std::string boot_id;              // /proc/sys/kernel/random/boot_id of the holder's host
  std::uint64_t process_start = 0;  // the holder's start, in clock ticks since boot (0: unknown)
  std::int64_t start_unix = 0;      // when the lock was taken
  std::string tool;

  // One line: "pid=1 host=h boot=<uuid> pstart=<ticks> start=2 tool=t".
  [[nodiscard]] std::string serialize() const;
  [[nodiscard]] std::string describe() const; // "pid 1 on h (tool), since <time>"
  // nullopt for anything that is not such a record (empty, garbage, binary).
  static std::optional<LockHolder> parse(std::string_view text);
  static LockHolder self(const std::string& tool);
};

// What can be proved about a recorded holder from this host.
enum class Liveness {
  alive,   // on this host, this boot, and the process with that pid and start time runs
  dead,    // on this host and gone: its pid is free, reused, or the host rebooted since
  unknown  // another host (or too little recorded to tell)
};
[[nodiscard]] Liveness liveness(const LockHolder& holder);

// This host's name and boot id ("" when unreadable).
[[nodiscard]] const std::string& this_host();
[[nodiscard]] const std::string& this_boot_id();
// A process's start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat); nullopt when there is no such process, or it has
// ended and waits to be reaped (a zombie).
[[nodiscard]] std::optional<std::uint64_t> process_start_ticks(pid_t pid);

enum class LockState { absent, free, held };

class FileLock {
public:
  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Takes the lock if nobody holds it; nullopt when it is held.
  [[nodiscard]] static Result<std::optional<FileLock>> try_acquire(const fs::path& path,
                                                                   const LockHolder& me);

  // Waits with a short random backoff until the lock is free or `timeout`
  // passes; the failure names the holder. `on_wait` is called once, when
  // the first attempt finds the lock held.
  [[nodiscard]] static Result<FileLock>
  acquire(const fs::path& path, const LockHolder& me, std::chrono::milliseconds timeout,
          const std::function<void(const std::optional<LockHolder>&)>& on_wait = {});

  [[nodiscard]] bool held() const { return fd_ >= 0; }
  [[nodiscard]] const fs::path& path() const { return path_; }
  void release();

private:
  FileLock(fs::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  fs::path path_;
  int fd_ = -1;
};

// Whether a lock file exists and whether someone holds it; fills `holder`
// from the record when there is one.
[[nodiscard]] LockState probe_lock(const fs::path& path, std::optional<LockHolder>* holder = nullptr);

// Removes a lock file nobody holds (one left by a holder that died). With
// force, removes it even when held. True when a file was removed.
[[nodiscard]] bool remove_lock_file(const fs::path& path, bool force);

} // namespace npc::util
