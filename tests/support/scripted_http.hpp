#pragma once
// A tiny HTTP server on a free loopback port that answers each connection's
// one request with the next scripted response, and records what it was
// asked (method, target, headers), so a test can check the exact requests
// a client makes: the instance metadata service, S3 retries.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace npc::test {

struct RecordedRequest {
  std::string method;
  std::string target;                         // "/latest/api/token"
  std::map<std::string, std::string> headers; // names lower-case
  std::string body;
};

// One scripted answer; std::nullopt in the script means "accept, read the
// request, never answer" (a hung server) until the server is destroyed.
using ScriptedResponse = std::optional<std::string>;

// "HTTP/1.1 <status> <reason>" with the body, its Content-Length and
// Connection: close.
[[nodiscard]] std::string http_response(int status, const std::string& reason, const std::string& body);

class ScriptedHttpServer {
public:
  explicit ScriptedHttpServer(std::vector<ScriptedResponse> script);
  ~ScriptedHttpServer(); // stops, closing any held connection
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const; // http://127.0.0.1:PORT
  [[nodiscard]] std::vector<RecordedRequest> requests() const;

private:
  void serve();

  std::vector<ScriptedResponse> script_;
  int listen_fd_ = -1;
  int wake_read_ = -1; // the destructor writes to wake_write_ to stop serve()
  int wake_write_ = -1;
  int port_ = 0;
  mutable std::mutex mutex_; // guards requests_
  std::vector<RecordedRequest> requests_;
  std::thread thread_;
};

} // namespace npc::test
