#pragma once
// A real S3 server for tests: s3rver (installed by tools/setup.sh) on a free
// loopback port over a temp directory, with one bucket. A missing s3rver
// fails the test: it never passes or skips for want of a component.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <npc/storage/s3_config.hpp>

#include "process.hpp"
#include "temp_dir.hpp"

namespace npc::test {

// s3rver's built-in account.
inline constexpr const char* kS3rverAccessKey = "S3RVER";
inline constexpr const char* kS3rverSecretKey = "S3RVER";
inline constexpr const char* kS3TestBucket = "test-bucket";

fs::path s3rver_path(); // <source>/.deps/s3rver/node_modules/.bin/s3rver

class S3Server {
public:
  S3Server() = default;
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;
  ~S3Server(); // SIGTERM, then SIGKILL past a grace period; reaped

  // Starts it over dir/data with kS3TestBucket and waits until it answers;
  // a failure is a fatal test failure (call under ASSERT_NO_FATAL_FAILURE).
  void start(const fs::path& dir);
  void stop();
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string endpoint() const; // http://127.0.0.1:PORT
  [[nodiscard]] storage::S3Config config() const;

private:
  std::optional<Child> child_;
  int port_ = 0;
};

// A temp directory with an S3 server started in it.
class S3ServerTest : public TempDirTest {
protected:
  void SetUp() override;
  void TearDown() override;
  S3Server server_;
};

// A loopback port nothing listens on right now.
[[nodiscard]] int free_loopback_port();

} // namespace npc::test
