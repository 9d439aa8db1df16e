#pragma once
// s3rver (installed by `bash tools/setup.sh` under .deps/s3rver) run as a
// child on a free loopback port: what the tests' S3Server fixture
// (s3_server.hpp) and the benchmark's S3 scenario (bench/src/s3rver.hpp)
// share. Failures come back as messages, which each of them reports its own
// way (a gtest failure, an exception); this library needs no GoogleTest.

#include <filesystem>
#include <optional>
#include <string>

#include <npc/storage/s3_config.hpp>
#include <npc/util/result.hpp>

namespace npc::test {

namespace fs = std::filesystem;

// s3rver's built-in account.
inline constexpr const char* kS3rverAccessKey = "S3RVER";
inline constexpr const char* kS3rverSecretKey = "S3RVER";

fs::path s3rver_path(); // <source>/.deps/s3rver/node_modules/.bin/s3rver

// A loopback port nothing listens on right now (0 when none could be had).
[[nodiscard]] int free_loopback_port();
// Whether something accepts TCP connections on 127.0.0.1:port.
[[nodiscard]] bool accepts_connections(int port);

struct S3rverOptions {
  fs::path data_dir;   // --directory; created when missing
  std::string bucket;  // --configure-bucket
  fs::path out_file;   // stdout, truncated
  fs::path err_file;   // stderr, truncated; may be out_file
  bool log_responses = false;   // without --silent: one line per response
  std::optional<fs::path> node; // nullopt: "node" looked up on PATH
};

class S3rverProcess {
public:
  S3rverProcess() = default;
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;
  ~S3rverProcess(); // stop()

  // Starts it in its own process group and waits until it accepts
  // connections; the failure says why (s3rver or node missing, no port, it
  // exited or did not listen in time).
  [[nodiscard]] Status start(const S3rverOptions& options);
  // SIGTERM to its group, SIGKILL past a grace period; reaped.
  void stop();
  [[nodiscard]] bool started() const { return pid_ > 0; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const;      // http://127.0.0.1:PORT
  [[nodiscard]] storage::S3Config config() const; // its account, us-east-1, endpoint()

private:
  int pid_ = -1;
  int port_ = 0;
};

} // namespace npc::test
