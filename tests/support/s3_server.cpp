#include "s3_server.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <sys/socket.h>
#include <tuple>
#include <unistd.h>

#include <gtest/gtest.h>

#include "paths.hpp"
#include "wait.hpp"

namespace npc::test {

namespace {

// node starts and s3rver creates its bucket in about a second; a loaded
// machine gets room.
constexpr std::chrono::milliseconds kStartTimeout{30000};
// s3rver closes its server on SIGTERM at once; past this it is killed.
constexpr std::chrono::milliseconds kStopGrace{5000};

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

} // namespace

fs::path s3rver_path() { return source_dir() / ".deps" / "s3rver" / "node_modules" / ".bin" / "s3rver"; }

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

void S3Server::start(const fs::path& dir) {
  fs::path bin = s3rver_path();
  ASSERT_TRUE(fs::exists(bin)) << "s3rver not found at " << bin.string() << ": run tools/setup.sh";
  port_ = free_loopback_port();
  ASSERT_NE(port_, 0) << "no free loopback port";
  fs::create_directories(dir / "data");
  // s3rver makes its continuation tokens with DES, which OpenSSL 3 (under
  // Node 17+) keeps in the legacy provider: without it, paging fails (500).
  std::vector<std::string> argv{"/usr/bin/node", "--openssl-legacy-provider", fs::canonical(bin).string(), "--directory", (dir / "data").string(),
                                "--address", "127.0.0.1", "--port", std::to_string(port_), "--silent",
                                "--configure-bucket", kS3TestBucket};
  child_.emplace(argv, RunOptions{}, dir / "s3rver");
  bool up = wait_until([&] { return !child_->running() || accepts_connections(port_); }, kStartTimeout);
  ASSERT_TRUE(up && child_->running()) << "s3rver did not start listening on 127.0.0.1:" << port_ << " (see "
                                       << (dir / "s3rver.err").string() << ")";
}

void S3Server::stop() {
  if (!child_) return;
  if (child_->running()) {
    child_->kill(SIGTERM);
    if (!wait_until([&] { return !child_->running(); }, kStopGrace)) child_->kill(SIGKILL);
    std::ignore = wait_until([&] { return !child_->running(); }, kStopGrace);
  }
  child_.reset(); // reaps, or kills the group and reaps
}

S3Server::~S3Server() { stop(); }

std::string S3Server::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

storage::S3Config S3Server::config() const {
  storage::S3Config config;
  config.credentials = {kS3rverAccessKey, kS3rverSecretKey, ""};
  config.region = "us-east-1";
  config.endpoint = endpoint();
  return config;
}

void S3ServerTest::SetUp() {
  TempDirTest::SetUp();
  ASSERT_NO_FATAL_FAILURE(server_.start(dir()));
}

void S3ServerTest::TearDown() {
  server_.stop();
  TempDirTest::TearDown();
}

} // namespace npc::test
