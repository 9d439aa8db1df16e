#pragma once
// Signals as events. A SignalWatcher blocks the signals it watches for as
// long as it lives and delivers them through a signalfd, so one poll() can
// wait for children, signals and timeouts together; no handler ever runs.
// Children get an empty mask and default handlers from spawn().

#include <initializer_list>
#include <thread>
#include <utility>
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

// A thread that takes no signal: a tool whose event loop reads its signals
// from a signalfd (SignalWatcher) would otherwise lose those the kernel
// hands to another thread of it. The thread starts with every signal
// blocked; the caller's mask is as it was.
template <class Function>
[[nodiscard]] std::thread thread_without_signals(Function&& function) {
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  struct Restore {
    sigset_t mask;
    ~Restore() { ::pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{before};
  return std::thread(std::forward<Function>(function));
}

// The signals a tool forwards to its children and ends on.
inline constexpr int kTerminatingSignals[] = {SIGINT, SIGTERM, SIGHUP};

} // namespace npc::util
