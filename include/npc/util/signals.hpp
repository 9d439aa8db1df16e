#pragma once
// Signals as events. A SignalWatcher blocks the signals it watches for as
// long as it lives and delivers them through a signalfd, so one poll() can
// wait for children, signals and timeouts together; no handler ever runs.
// Children get an empty mask and default handlers from spawn().

#include <initializer_list>
#include <vector>

#include <signal.h>

namespace npc::util {

class SignalWatcher {
public:
  SignalWatcher(std::initializer_list<int> signals);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  // Signals received since the last call (never blocks).
  [[nodiscard]] std::vector<int> drain();
  // Waits up to timeout_ms (-1: forever) for a signal or for one of `fds` to
  // become readable. Returns the signals; readable fds are set in `ready`.
  std::vector<int> wait(int timeout_ms, const std::vector<int>& fds = {},
                        std::vector<int>* ready = nullptr);

private:
  int fd_ = -1;
  sigset_t old_mask_{};
};

// The signals a tool forwards to its children and ends on.
inline constexpr int kTerminatingSignals[] = {SIGINT, SIGTERM, SIGHUP};

} // namespace npc::util
