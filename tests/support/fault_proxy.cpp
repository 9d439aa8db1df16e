#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <list>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace npc::test {

namespace {

// Stop reading from one side while this much waits to be written to the
// other: a peer that does not read slows its partner instead of growing a
// buffer without end.
constexpr std::size_t kMaxPending = 256 * 1024;
// A request head larger than this is not HTTP we understand; the proxy
// stops parsing and just forwards.
constexpr std::size_t kMaxHead = 64 * 1024;

constexpr std::string_view kSlowDownBody =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request "
    "rate.</Message><RequestId>FAULTPROXY0000000</RequestId><HostId>fault-proxy</HostId></Error>";

enum class Fault { none, throttle, reset_request, reset_response, stall };

struct Connection {
  int client = -1;
  int upstream = -1;
  std::string to_client;
  std::string to_upstream;
  // Where the client's byte stream is: in a request head, or in a body.
  std::string head;
  std::uint64_t body_left = 0;
  bool head_only_response = false; // the current request is a HEAD
  // The fault of the current request and how far it has gone.
  Fault fault = Fault::none;
  bool throttle_close = false;
  std::uint64_t fault_bytes = 0;
  std::uint64_t fault_progress = 0;
  // The proxy answered and said "Connection: close": close the client once
  // the answer is written, read nothing more from it.
  bool close_client_after_flush = false;
  bool done = false;
};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// close() after SO_LINGER {on, 0} sends RST: the peer sees "connection
// reset", not an orderly end.
void reset_socket(int& fd) {
  if (fd < 0) return;
  linger abort_on_close{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  ::close(fd);
  fd = -1;
}

void close_socket(int& fd) {
  if (fd < 0) return;
  ::close(fd);
  fd = -1;
}

// Writes what the socket takes now; false on a broken connection.
bool flush(int fd, std::string& pending) {
  while (!pending.empty()) {
    ssize_t n = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    pending.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct RequestHead {
  std::string method;
  std::uint64_t content_length = 0;
  bool expect_continue = false;
};

RequestHead parse_head(std::string_view head) {
  RequestHead parsed;
  parsed.method = std::string(head.substr(0, head.find(' ')));
  std::size_t line_start = head.find("\r\n");
  while (line_start != std::string_view::npos && line_start + 2 < head.size()) {
    line_start += 2;
    std::size_t line_end = head.find("\r\n", line_start);
    std::string_view line = head.substr(line_start, line_end - line_start);
    std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string name = lower(line.substr(0, colon));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (name == "content-length") parsed.content_length = std::stoull(std::string(value));
      if (name == "expect" && lower(value) == "100-continue") parsed.expect_continue = true;
    }
    line_start = line_end;
  }
  return parsed;
}

std::string slow_down_response(bool close, bool head_only) {
  std::string response = "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: " +
                         std::to_string(kSlowDownBody.size()) + "\r\nConnection: " +
                         (close ? "close" : "keep-alive") + "\r\n\r\n";
  if (!head_only) response += kSlowDownBody; // a HEAD answer has no body
  return response;
}

int listen_on_loopback(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "fault proxy cannot listen on loopback";
    return fd;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

int connect_upstream(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  set_nonblocking(fd);
  return fd;
}

// What the poll thread does with one connection; every decision that reads
// or spends a rule goes through take_fault under the proxy's mutex.
class Pump {
public:
  Pump(std::mutex& mutex, FaultProxy::Rules& rules, FaultCounts& counts)
      : mutex_(mutex), rules_(rules), counts_(counts) {}

  // Bytes the client sent: split into request heads and bodies.
  void from_client(Connection& c, const char* data, std::size_t size) {
    std::string_view in(data, size);
    while (!in.empty() && !c.done && !c.close_client_after_flush) {
      if (c.body_left == 0) {
        std::size_t before = c.head.size();
        c.head.append(in);
        std::size_t end = c.head.find("\r\n\r\n");
        if (end == std::string::npos) {
          if (c.head.size() > kMaxHead) forward_raw(c, std::exchange(c.head, {}));
          return;
        }
        end += 4;
        in.remove_prefix(end - before);
        c.head.resize(end);
        start_request(c, parse_head(c.head));
        c.head.clear();
        continue;
      }
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(c.body_left, in.size()));
      body(c, in.substr(0, take));
      in.remove_prefix(take);
    }
  }

  // Bytes the server sent, for the current request.
  void from_upstream(Connection& c, const char* data, std::size_t size) {
    if (c.fault == Fault::stall) return; // swallowed: the client hears nothing
    if (c.fault != Fault::reset_response) {
      c.to_client.append(data, size);
      return;
    }
    std::uint64_t room = c.fault_bytes - c.fault_progress;
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(room, size));
    c.to_client.append(data, take);
    c.fault_progress += take;
    if (c.fault_progress >= c.fault_bytes) reset(c);
  }

private:
  void start_request(Connection& c, const RequestHead& request) {
    c.body_left = request.content_length;
    c.head_only_response = request.method == "HEAD";
    c.fault_progress = 0;
    {
      std::lock_guard lock(mutex_);
      ++counts_.requests;
      c.fault = take_fault(c);
      if (c.fault != Fault::throttle) ++counts_.forwarded;
      if (c.fault == Fault::stall) ++counts_.stalled;
    }
    if (c.fault != Fault::throttle) {
      c.to_upstream += c.head;
      return;
    }
    // A client that waits for "100 Continue" sends no body: answer at once,
    // as S3 does, and close, since the connection's state is then unclear.
    // Otherwise the body is read and dropped first (body() answers), so that
    // closing never meets unread bytes, which would turn it into a reset.
    if (request.expect_continue && c.body_left > 0) {
      c.throttle_close = true;
      answer_throttled(c);
    } else if (c.body_left == 0) {
      answer_throttled(c);
    }
  }

  Fault take_fault(Connection& c) {
    if (rules_.throttle > 0) {
      --rules_.throttle;
      ++counts_.throttled;
      c.throttle_close = rules_.throttle_connection == ThrottleConnection::close;
      return Fault::throttle;
    }
    if (rules_.reset_request > 0) {
      --rules_.reset_request;
      c.fault_bytes = rules_.reset_request_bytes;
      return Fault::reset_request;
    }
    if (rules_.reset_response > 0) {
      --rules_.reset_response;
      c.fault_bytes = rules_.reset_response_bytes;
      return Fault::reset_response;
    }
    if (rules_.stall > 0) {
      --rules_.stall;
      return Fault::stall;
    }
    return Fault::none;
  }

  void body(Connection& c, std::string_view bytes) {
    c.body_left -= bytes.size();
    if (c.fault == Fault::throttle) { // read and dropped
      if (c.body_left == 0) answer_throttled(c);
      return;
    }
    if (c.fault != Fault::reset_request) {
      c.to_upstream.append(bytes);
      return;
    }
    std::uint64_t room = c.fault_bytes - c.fault_progress;
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(room, bytes.size()));
    c.to_upstream.append(bytes.substr(0, take));
    c.fault_progress += take;
    if (c.fault_progress >= c.fault_bytes) reset(c);
  }

  void answer_throttled(Connection& c) {
    c.to_client += slow_down_response(c.throttle_close, c.head_only_response);
    if (c.throttle_close) c.close_client_after_flush = true;
    c.fault = Fault::none;
  }

  // Passes on what is due, then resets the client and drops the server.
  void reset(Connection& c) {
    std::ignore = flush(c.upstream, c.to_upstream);
    std::ignore = flush(c.client, c.to_client);
    reset_socket(c.client);
    close_socket(c.upstream);
    c.done = true;
    std::lock_guard lock(mutex_);
    ++counts_.resets;
  }

  void forward_raw(Connection& c, const std::string& bytes) { c.to_upstream += bytes; }

  std::mutex& mutex_;
  FaultProxy::Rules& rules_;
  FaultCounts& counts_;
};

} // namespace

FaultProxy::FaultProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = listen_on_loopback(port_);
  int wake[2] = {-1, -1};
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) ADD_FAILURE() << "fault proxy cannot make a pipe";
  wake_read_ = wake[0];
  wake_write_ = wake[1];
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  std::ignore = ::write(wake_write_, "x", 1);
  thread_.join();
  close_socket(listen_fd_);
  close_socket(wake_read_);
  close_socket(wake_write_);
}

std::string FaultProxy::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::throttle(int count, ThrottleConnection connection) {
  std::lock_guard lock(mutex_);
  rules_.throttle = count;
  rules_.throttle_connection = connection;
}

void FaultProxy::reset_responses(int count, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  rules_.reset_response = count;
  rules_.reset_response_bytes = bytes;
}

void FaultProxy::reset_requests(int count, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  rules_.reset_request = count;
  rules_.reset_request_bytes = bytes;
}

void FaultProxy::stall_responses(int count) {
  std::lock_guard lock(mutex_);
  rules_.stall = count;
}

void FaultProxy::clear() {
  std::lock_guard lock(mutex_);
  rules_ = Rules{};
}

FaultCounts FaultProxy::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void FaultProxy::run() {
  Pump pump(mutex_, rules_, counts_);
  std::list<Connection> connections;
  std::vector<pollfd> fds;
  std::vector<Connection*> owners; // owners[i]: the connection of fds[i], from index 2 on
  char buffer[64 * 1024];
  for (;;) {
    fds.assign({pollfd{wake_read_, POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    owners.assign(2, nullptr);
    for (Connection& c : connections) {
      short client_events = 0;
      if (!c.close_client_after_flush && c.to_upstream.size() < kMaxPending) client_events |= POLLIN;
      if (!c.to_client.empty()) client_events |= POLLOUT;
      fds.push_back(pollfd{c.client, client_events, 0});
      owners.push_back(&c);
      if (c.upstream >= 0) {
        short upstream_events = 0;
        if (c.to_client.size() < kMaxPending) upstream_events |= POLLIN;
        if (!c.to_upstream.empty()) upstream_events |= POLLOUT;
        fds.push_back(pollfd{c.upstream, upstream_events, 0});
        owners.push_back(&c);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "fault proxy poll failed: " << std::strerror(errno);
      break;
    }
    if (fds[0].revents != 0) break; // stop

    for (std::size_t i = 2; i < fds.size(); ++i) {
      Connection& c = *owners[i];
      if (c.done || fds[i].revents == 0) continue;
      bool is_client = fds[i].fd == c.client;
      if (!is_client && fds[i].fd != c.upstream) continue; // closed earlier in this round
      if (fds[i].revents & POLLOUT) {
        if (!flush(fds[i].fd, is_client ? c.to_client : c.to_upstream)) {
          c.done = true;
          continue;
        }
      }
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          if (is_client) {
            c.done = true; // the client went away: so does its server side
          } else if (c.fault == Fault::stall) {
            close_socket(c.upstream); // leave the client waiting
          } else {
            close_socket(c.upstream); // pass on what came, then end the client too
            c.close_client_after_flush = true;
          }
          continue;
        }
        if (is_client)
          pump.from_client(c, buffer, static_cast<std::size_t>(n));
        else
          pump.from_upstream(c, buffer, static_cast<std::size_t>(n));
      }
    }

    for (auto it = connections.begin(); it != connections.end();) {
      Connection& c = *it;
      if (!c.done && c.client >= 0 && !c.to_client.empty()) std::ignore = flush(c.client, c.to_client);
      if (!c.done && c.upstream >= 0 && !c.to_upstream.empty()) std::ignore = flush(c.upstream, c.to_upstream);
      if (c.close_client_after_flush && c.to_client.empty()) c.done = true;
      if (c.done) {
        close_socket(c.client);
        close_socket(c.upstream);
        it = connections.erase(it);
      } else {
        ++it;
      }
    }

    if (fds[1].revents & POLLIN) {
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client >= 0) {
        {
          std::lock_guard lock(mutex_);
          ++counts_.connections;
        }
        int upstream = connect_upstream(upstream_port_);
        if (upstream < 0) { // no server: the client sees its connection closed without an answer
          ::close(client);
        } else {
          Connection& c = connections.emplace_back();
          c.client = client;
          c.upstream = upstream;
        }
      }
    }
  }
  for (Connection& c : connections) {
    close_socket(c.client);
    close_socket(c.upstream);
  }
}

} // namespace npc::test
