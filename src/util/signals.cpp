#include <npc/util/signals.hpp>

#include <cerrno>
#include <poll.h>
#include <stdexcept>
#include <sys/signalfd.h>
#include <unistd.h>

namespace npc::util {

SignalWatcher::SignalWatcher(std::initializer_list<int> signals) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : signals) sigaddset(&mask, s);
  if (::sigprocmask(SIG_BLOCK, &mask, &old_mask_) != 0)
    throw std::runtime_error("cannot block signals");
  fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    throw std::runtime_error("cannot create a signalfd");
  }
}

SignalWatcher::~SignalWatcher() {
  ::close(fd_);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalWatcher::drain() {
  std::vector<int> out;
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = ::read(fd_, &info, sizeof info);
    if (n != static_cast<ssize_t>(sizeof info)) {
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    out.push_back(static_cast<int>(info.ssi_signo));
  }
  return out;
}

std::vector<int> SignalWatcher::wait(int timeout_ms, const std::vector<int>& fds,
                                     std::vector<int>* ready) {
  std::vector<pollfd> polled;
  polled.push_back({fd_, POLLIN, 0});
  for (int f : fds) polled.push_back({f, POLLIN, 0});
  int n = ::poll(polled.data(), polled.size(), timeout_ms);
  if (n <= 0) return {};
  if (ready != nullptr) {
    for (size_t i = 1; i < polled.size(); ++i)
      if (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) ready->push_back(polled[i].fd);
  }
  if (polled[0].revents & POLLIN) return drain();
  return {};
}

} // namespace npc::util
