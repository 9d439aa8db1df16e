#include "silent_port.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace npc::test {

SilentPort::SilentPort() { open(); }

void SilentPort::open() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener_, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  port_ = ntohs(addr.sin_port);
  // Backlog 0: Linux queues one connection, then drops SYNs.
  ASSERT_EQ(::listen(listener_, 0), 0);
  // Fill the queue (non-blocking: a filler past the limit stays in SYN_SENT,
  // which is fine, it is ours).
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    fillers_.push_back(fd);
    std::ignore = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  // Let the handshakes of the queued ones finish.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

SilentPort::~SilentPort() {
  for (int fd : fillers_) ::close(fd);
  if (listener_ >= 0) ::close(listener_);
}

} // namespace npc::test
