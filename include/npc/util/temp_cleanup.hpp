#pragma once
// Temporary files and folders this process is writing, removed when a
// terminating signal (SIGINT, SIGTERM, SIGHUP) ends the process by its
// default action: ^C or a kill during `neuron_cache export -o out.tar` must
// not leave a `.tmp-*` beside the user's file, nor a compile's work folder in
// the cache. (SIGKILL leaves them; the cache's own tools clear those, see
// cache/leftover_temps.hpp.)
//
// A process that watches these signals itself (SignalWatcher) blocks them,
// so the handler never runs there: it ends by returning, and the owners'
// destructors clean up. A signal the process was started with ignored
// (nohup) stays ignored.
//
// The handler uses only async-signal-safe system calls (unlink, openat,
// getdents64, rmdir), then re-raises the signal with its default action, so
// the exit status still names the signal.

#include <filesystem>

namespace npc::util {

// Registers `path` for removal on such a signal for as long as it lives.
// Registration never fails the caller: past the fixed number of slots, or for
// a path longer than PATH_MAX, the path is simply not cleaned on a signal.
class TempCleanup {
public:
  TempCleanup() = default;
  explicit TempCleanup(const std::filesystem::path& path);
  ~TempCleanup();
  TempCleanup(TempCleanup&& other) noexcept : slot_(other.slot_) { other.slot_ = -1; }
  TempCleanup& operator=(TempCleanup&& other) noexcept;
  TempCleanup(const TempCleanup&) = delete;
  TempCleanup& operator=(const TempCleanup&) = delete;

  // Stops watching (the file was published, removed, or is kept).
  void release();

private:
  int slot_ = -1;
};

} // namespace npc::util
