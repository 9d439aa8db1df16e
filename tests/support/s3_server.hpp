#pragma once
// A real S3 server for a test, with one bucket, kS3TestBucket. By default
// the test run's RADOS Gateway (rgw_tenant.hpp), which verifies signatures
// and honours conditional writes as AWS S3 does, in a tenant of the test's
// own; or an s3rver of the test's own (installed by tools/setup.sh) for a
// test that stops its server, or that shows what a server which ignores
// If-None-Match does. A missing server fails the test: it never passes or
// skips for want of a component.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <npc/storage/s3_config.hpp>

#include "process.hpp"
#include "rgw_tenant.hpp"
#include "s3rver_process.hpp" // kS3rverAccessKey, kS3rverSecretKey, s3rver_path, free_loopback_port
#include "temp_dir.hpp"

namespace npc::test {

inline constexpr const char* kS3TestBucket = "test-bucket";

enum class S3Backend {
  rgw,    // the run's RADOS Gateway, shared, in a tenant of this test's own
  s3rver, // an s3rver of this test's own, which it may stop
};

class S3Server {
public:
  S3Server() = default;
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;
  ~S3Server() = default; // an s3rver: SIGTERM, then SIGKILL past a grace period; reaped

  // Makes the test's bucket there and, for an s3rver, starts it over
  // dir/data and waits until it answers (output in dir/s3rver.out and
  // .err). A failure is a fatal test failure (call under
  // ASSERT_NO_FATAL_FAILURE).
  void start(const fs::path& dir, S3Backend backend = S3Backend::rgw);
  // Takes the server away, as an outage would: only an s3rver of the
  // test's own can be (the gateway is the whole run's).
  void stop();
  // What a test's tear-down calls: stops an s3rver, leaves the gateway.
  void shut_down();
  [[nodiscard]] S3Backend backend() const { return backend_; }
  [[nodiscard]] int port() const;
  [[nodiscard]] std::string endpoint() const; // http://127.0.0.1:PORT
  [[nodiscard]] std::string access_key() const;
  [[nodiscard]] std::string secret_key() const;
  [[nodiscard]] storage::S3Config config() const;

private:
  S3Backend backend_ = S3Backend::rgw;
  RgwTenant tenant_;
  S3rverProcess process_;
};

// A temp directory with an S3 server for the test; backend() chooses which.
class S3ServerTest : public TempDirTest {
protected:
  void SetUp() override;
  void TearDown() override;
  [[nodiscard]] virtual S3Backend backend() const { return S3Backend::rgw; }
  S3Server server_;
};

} // namespace npc::test
