#include "s3rver_process.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <npc/util/process.hpp>

namespace npc::test {

namespace {

// node starts and s3rver creates its bucket in about a second; a loaded
// machine gets room.
constexpr std::chrono::milliseconds kStartTimeout{30000};
// s3rver closes its server on SIGTERM at once; past this it is killed.
constexpr std::chrono::milliseconds kStopGrace{5000};
constexpr std::chrono::milliseconds kPoll{10};

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

} // namespace

fs::path s3rver_path() { return fs::path(NPC_SOURCE_DIR) / ".deps" / "s3rver" / "node_modules" / ".bin" / "s3rver"; }

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

bool accepts_connections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr = loopback(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

Status S3rverProcess::start(const S3rverOptions& options) {
  stop();
  const fs::path bin = s3rver_path();
  if (!fs::exists(bin)) return fail("s3rver is not installed at " + bin.string() + ": `bash tools/setup.sh` installs it");
  fs::path node;
  if (options.node) {
    node = *options.node;
  } else {
    const char* path = std::getenv("PATH");
    auto found = util::find_executable("node", path ? std::optional<std::string>(path) : std::nullopt);
    if (!found) return fail("node is not installed (" + found.error() + "): `bash tools/setup.sh` installs it");
    node = *found;
  }
  port_ = free_loopback_port();
  if (port_ == 0) return fail("no free loopback port for s3rver");
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) return fail("cannot create " + options.data_dir.string() + ": " + ec.message());

  // s3rver makes its list continuation tokens with DES, which OpenSSL 3
  // (under Node 17+) keeps in the legacy provider: without it, paging fails
  // (500).
  util::SpawnOptions spawn;
  spawn.argv = {node.string(), "--openssl-legacy-provider", fs::canonical(bin).string(), "--directory",
                options.data_dir.string(), "--address", "127.0.0.1", "--port", std::to_string(port_)};
  if (!options.log_responses) spawn.argv.emplace_back("--silent");
  spawn.argv.insert(spawn.argv.end(), {"--configure-bucket", options.bucket});

  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int out = ::open(options.out_file.c_str(), kFlags, 0644);
  int err = options.err_file == options.out_file ? out : ::open(options.err_file.c_str(), kFlags, 0644);
  if (out < 0 || err < 0) {
    if (out >= 0) ::close(out);
    if (err >= 0 && err != out) ::close(err);
    return fail("cannot create " + options.out_file.string() + " or " + options.err_file.string());
  }
  spawn.output = util::OutputTo::fds;
  spawn.stdout_fd = out;
  spawn.stderr_fd = err;
  auto child = util::spawn(spawn);
  if (err != out) ::close(err);
  ::close(out);
  if (!child) return fail("cannot start s3rver: " + child.error());
  pid_ = child->pid;

  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (!accepts_connections(port_)) {
    if (util::try_wait_child(pid_)) {
      pid_ = -1;
      return fail("s3rver exited at start (see " + options.err_file.string() + ")");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      return fail("s3rver did not start listening on 127.0.0.1:" + std::to_string(port_) + " (see " +
                  options.err_file.string() + ")");
    }
    std::this_thread::sleep_for(kPoll);
  }
  return ok_status();
}

void S3rverProcess::stop() {
  if (pid_ <= 0) return;
  util::kill_process_group(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (!util::try_wait_child(pid_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      util::kill_process_group(pid_, SIGKILL);
      std::ignore = util::wait_child(pid_);
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  pid_ = -1;
}

S3rverProcess::~S3rverProcess() { stop(); }

std::string S3rverProcess::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

storage::S3Config S3rverProcess::config() const {
  storage::S3Config config;
  config.credentials = {kS3rverAccessKey, kS3rverSecretKey, ""};
  config.region = "us-east-1";
  config.endpoint = endpoint();
  return config;
}

} // namespace npc::test
