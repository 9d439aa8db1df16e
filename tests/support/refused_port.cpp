#include "refused_port.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace npc::test {

RefusedPort::RefusedPort() { open(); }

void RefusedPort::open() {
  socket_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(socket_, 0) << "socket: " << std::strerror(errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  ASSERT_EQ(::bind(socket_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << "bind: " << std::strerror(errno);
  ASSERT_EQ(::getsockname(socket_, reinterpret_cast<sockaddr*>(&addr), &length), 0)
      << "getsockname: " << std::strerror(errno);
  port_ = ntohs(addr.sin_port);
}

RefusedPort::~RefusedPort() {
  if (socket_ >= 0) ::close(socket_);
}

} // namespace npc::test
