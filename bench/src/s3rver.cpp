#include "s3rver.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <netinet/in.h>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <npc/util/process.hpp>

#include "harness.hpp"

namespace bench {

namespace {

constexpr double kStartSeconds = 30;
constexpr double kStopSeconds = 5;

bool accepts_connections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

bool exited(int pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

} // namespace

S3rver::S3rver(const fs::path& dir, const std::string& bucket) : data_(dir / "data"), log_(dir / "s3rver.log") {
  const fs::path bin = fs::path(NPC_BENCH_SOURCE_DIR) / ".deps" / "s3rver" / "node_modules" / ".bin" / "s3rver";
  if (!fs::exists(bin))
    throw std::runtime_error("s3rver is not installed (" + bin.string() + "): `bash tools/setup.sh` installs it");
  const char* path = std::getenv("PATH");
  auto node = npc::util::find_executable("node", path ? std::optional<std::string>(path) : std::nullopt);
  if (!node) throw std::runtime_error("node is not installed: `bash tools/setup.sh` installs it");
  port_ = free_loopback_port();
  if (port_ == 0) throw std::runtime_error("no free loopback port for s3rver");
  fs::create_directories(data_);
  npc::util::SpawnOptions spawn;
  // s3rver makes its list continuation tokens with DES, which OpenSSL 3
  // keeps in the legacy provider. Without --silent it logs every response.
  spawn.argv = {node->string(), "--openssl-legacy-provider", fs::canonical(bin).string(), "--directory",
                data_.string(), "--address", "127.0.0.1", "--port", std::to_string(port_), "--configure-bucket", bucket};
  spawn.output = npc::util::OutputTo::file;
  spawn.output_file = log_;
  auto child = npc::util::spawn(spawn);
  if (!child) throw std::runtime_error("cannot start s3rver: " + child.error());
  pid_ = child->pid;
  double deadline = now_seconds() + kStartSeconds;
  while (!accepts_connections(port_)) {
    if (exited(pid_)) {
      pid_ = -1;
      throw std::runtime_error("s3rver exited at start (see " + log_.string() + ")");
    }
    if (now_seconds() > deadline) throw std::runtime_error("s3rver did not start listening (see " + log_.string() + ")");
    ::usleep(50000);
  }
}

S3rver::~S3rver() {
  if (pid_ < 0) return;
  npc::util::kill_process_group(pid_, SIGTERM);
  double deadline = now_seconds() + kStopSeconds;
  while (!exited(pid_)) {
    if (now_seconds() > deadline) {
      npc::util::kill_process_group(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      break;
    }
    ::usleep(20000);
  }
}

std::string S3rver::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

npc::storage::S3Config S3rver::config() const {
  npc::storage::S3Config config;
  config.credentials = {"S3RVER", "S3RVER", ""};
  config.region = "us-east-1";
  config.endpoint = endpoint();
  return config;
}

std::size_t S3rver::responses_logged() const {
  std::error_code ec;
  std::uintmax_t size = fs::file_size(log_, ec);
  for (int i = 0; i < 50; ++i) { // up to 1 s for the log to settle
    ::usleep(20000);
    std::uintmax_t now = fs::file_size(log_, ec);
    if (now == size && i >= 5) break;
    size = now;
  }
  // koa-logger's response lines end "<status> <time> <size>", e.g.
  // "/b/k.neff 200 169ms 0b" or "... 200 2,315ms 200MB" (the time grouped
  // with commas, in seconds past 10 s); s3rver's other lines are sentences.
  static const std::regex response(R"( [1-5][0-9][0-9] [0-9.,]+m?s [^ ]+$)");
  std::istringstream lines(read_text(log_));
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, response)) ++n;
  return n;
}

} // namespace bench
