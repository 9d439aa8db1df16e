#pragma once
// A loopback port that refuses every connection at once, as one does where
// a server was and has stopped: a socket bound to it and never listening,
// kept so that nothing else takes the port while the test runs.

#include <string>

namespace npc::test {

class RefusedPort {
public:
  RefusedPort(); // a failure is a fatal test failure: check HasFatalFailure()
  ~RefusedPort();
  RefusedPort(const RefusedPort&) = delete;
  RefusedPort& operator=(const RefusedPort&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
  void open(); // ASSERT_* need a function returning void
  int socket_ = -1;
  int port_ = 0;
};

} // namespace npc::test
