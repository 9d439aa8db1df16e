#include "scripted_http.hpp"

#include <arpa/inet.h>
#include <cctype>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tuple>

#include <gtest/gtest.h>

namespace npc::test {

namespace {

// Waits for `fd` or the stop pipe; false when told to stop.
bool wait_readable(int fd, int wake) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
  for (;;) {
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && fds[1].revents == 0;
  }
}

RecordedRequest parse_request(const std::string& text) {
  RecordedRequest request;
  std::size_t line_end = text.find("\r\n");
  std::string first = text.substr(0, line_end);
  std::size_t space = first.find(' ');
  request.method = first.substr(0, space);
  request.target = first.substr(space + 1, first.rfind(' ') - space - 1);
  std::size_t head_end = text.find("\r\n\r\n");
  std::size_t pos = line_end + 2;
  while (pos < head_end) {
    std::size_t end = text.find("\r\n", pos);
    std::string line = text.substr(pos, end - pos);
    std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::size_t value = line.find_first_not_of(' ', colon + 1);
      request.headers[name] = value == std::string::npos ? "" : line.substr(value);
    }
    pos = end + 2;
  }
  request.body = text.substr(head_end + 4);
  return request;
}

} // namespace

std::string http_response(int status, const std::string& reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

ScriptedHttpServer::ScriptedHttpServer(std::vector<ScriptedResponse> script) : script_(std::move(script)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    ADD_FAILURE() << "scripted HTTP server cannot listen on loopback";
  port_ = ntohs(addr.sin_port);
  int wake[2] = {-1, -1};
  if (::pipe2(wake, O_CLOEXEC) != 0) ADD_FAILURE() << "scripted HTTP server cannot make a pipe";
  wake_read_ = wake[0];
  wake_write_ = wake[1];
  thread_ = std::thread([this] { serve(); });
}

ScriptedHttpServer::~ScriptedHttpServer() {
  std::ignore = ::write(wake_write_, "x", 1);
  thread_.join();
  for (int fd : {listen_fd_, wake_read_, wake_write_})
    if (fd >= 0) ::close(fd);
}

std::string ScriptedHttpServer::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<RecordedRequest> ScriptedHttpServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void ScriptedHttpServer::serve() {
  std::vector<int> held; // connections of "never answer" steps, closed at the end
  for (const auto& response : script_) {
    if (!wait_readable(listen_fd_, wake_read_)) break;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) break;
    std::string text;
    char buffer[4096];
    std::size_t head_end = std::string::npos;
    std::size_t want = 0;
    for (;;) {
      if (head_end == std::string::npos && (head_end = text.find("\r\n\r\n")) != std::string::npos) {
        RecordedRequest head = parse_request(text);
        auto length = head.headers.find("content-length");
        want = head_end + 4 + (length == head.headers.end() ? 0 : std::stoull(length->second));
      }
      if (head_end != std::string::npos && text.size() >= want) break;
      if (!wait_readable(client, wake_read_)) break;
      ssize_t n = ::read(client, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
    }
    if (head_end != std::string::npos) {
      std::lock_guard lock(mutex_);
      requests_.push_back(parse_request(text));
    }
    if (response) {
      std::ignore = ::write(client, response->data(), response->size());
      ::close(client);
    } else {
      held.push_back(client);
    }
  }
  // Past the script: hold until told to stop.
  std::ignore = wait_readable(wake_read_, wake_read_);
  for (int fd : held) ::close(fd);
}

} // namespace npc::test
