#pragma once
// A loopback port where a TCP connect never completes: a listener that
// accepts nothing, its accept queue already full, so the kernel drops every
// new SYN and the connecting side waits until its own timeout. What an
// address nobody routes does, without depending on the network (some
// sandboxes answer every outbound address themselves).

#include <string>
#include <vector>

namespace npc::test {

class SilentPort {
public:
  SilentPort(); // a failure is a fatal test failure: check HasFatalFailure()
  ~SilentPort();
  SilentPort(const SilentPort&) = delete;
  SilentPort& operator=(const SilentPort&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
  void open();
  int listener_ = -1;
  std::vector<int> fillers_;
  int port_ = 0;
};

} // namespace npc::test
