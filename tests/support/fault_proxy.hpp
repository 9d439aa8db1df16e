#pragma once
// A TCP proxy between a client under test and a real HTTP server (s3rver)
// that injects the failures a network and S3 produce: throttling answers,
// connections reset in the middle of a request or a response, responses
// that never come. It reads just enough HTTP/1.1 to find where each
// request starts and how long its body is (Content-Length; chunked bodies
// are not parsed: our client never sends them), so faults land on a chosen
// request and the requests it saw can be counted exactly.
//
// One thread polls every socket (non-blocking, buffered both ways), so a
// peer that stops reading never blocks the others. Rules are set from the
// test thread at any time; each applies to the next requests whose headers
// arrive after it is set, and is used up request by request.

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace npc::test {

// How a throttling answer from the proxy leaves the connection.
enum class ThrottleConnection {
  // "Connection: close", then the proxy closes (what S3 does on an early
  // answer to a request whose body it will not read).
  close,
  // "Connection: keep-alive": the request body is read and dropped first,
  // so the next request on the connection goes through as usual.
  keep_alive,
};

struct FaultCounts {
  int requests = 0;       // request heads seen, faulted or not
  int forwarded = 0;      // requests passed to the server
  int throttled = 0;      // answered 503 SlowDown by the proxy
  int resets = 0;         // connections reset (RST) by a rule
  int stalled = 0;        // responses held back
  int connections = 0;    // client connections accepted
};

class FaultProxy {
public:
  // Listens on a free loopback port and forwards to 127.0.0.1:upstream_port.
  explicit FaultProxy(int upstream_port);
  ~FaultProxy(); // stops the thread, closes every socket
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const; // http://127.0.0.1:PORT

  // The next `count` requests are answered "503 SlowDown" by the proxy
  // with S3's XML error body; the server never sees them.
  void throttle(int count, ThrottleConnection connection = ThrottleConnection::keep_alive);
  // The next `count` requests are forwarded, and the connection is reset
  // once `bytes` bytes of the response have reached the client.
  void reset_responses(int count, std::uint64_t bytes);
  // The next `count` requests are reset once `bytes` bytes of their body
  // have been forwarded (requests with a shorter body are not affected but
  // do use up the rule).
  void reset_requests(int count, std::uint64_t bytes);
  // The next `count` requests are forwarded but their responses are never
  // passed on: the client sees a silent connection.
  void stall_responses(int count);
  // Drops every rule not yet used.
  void clear();

  [[nodiscard]] FaultCounts counts() const;

  // Shared with the poll thread; public for it only.
  struct Rules {
    int throttle = 0;
    ThrottleConnection throttle_connection = ThrottleConnection::keep_alive;
    int reset_response = 0;
    std::uint64_t reset_response_bytes = 0;
    int reset_request = 0;
    std::uint64_t reset_request_bytes = 0;
    int stall = 0;
  };

private:
  void run();

  int upstream_port_;
  int listen_fd_ = -1;
  int wake_read_ = -1; // the destructor writes to wake_write_ to stop run()
  int wake_write_ = -1;
  int port_ = 0;
  mutable std::mutex mutex_; // guards rules_ and counts_
  Rules rules_;
  FaultCounts counts_;
  std::thread thread_;
};

} // namespace npc::test
