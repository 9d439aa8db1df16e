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
#include "s3rver_process.hpp" // kS3rverAccessKey, kS3rverSecretKey, s3rver_path, free_loopback_port
#include "temp_dir.hpp"

namespace npc::test {

inline constexpr const char* kS3TestBucket = "test-bucket";

class S3Server {
public:
  S3Server() = default;
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;
  ~S3Server() = default; // SIGTERM, then SIGKILL past a grace period; reaped

  // Starts it over dir/data with kS3TestBucket and waits until it answers;
  // a failure is a fatal test failure (call under ASSERT_NO_FATAL_FAILURE).
  // Output in dir/s3rver.out and dir/s3rver.err.
  void start(const fs::path& dir);
  void stop() { process_.stop(); }
  [[nodiscard]] int port() const { return process_.port(); }
  [[nodiscard]] std::string endpoint() const { return process_.endpoint(); } // http://127.0.0.1:PORT
  [[nodiscard]] storage::S3Config config() const { return process_.config(); }

private:
  S3rverProcess process_;
};

// A temp directory with an S3 server started in it.
class S3ServerTest : public TempDirTest {
protected:
  void SetUp() override;
  void TearDown() override;
  S3Server server_;
};

} // namespace npc::test
