#pragma once
// A place of its own for one test on the test run's RADOS Gateway
// (tests/support/rgw.sh), which ctest starts once per run (the fixture "rgw",
// tests/CMakeLists.txt) and which verifies SigV4 and honours conditional
// writes as AWS S3 does. Each test gets a tenant: a user with fresh keys in
// a namespace of its own, so its bucket is named kS3TestBucket as in every
// test, and no other test sees it.
//
// Where the gateway is: NPC_TEST_RGW_DIR, else <build>/rgw. A gateway that
// is not running fails the test, saying how to start one.

#include <filesystem>
#include <string>

#include <npc/storage/s3_config.hpp>
#include <npc/util/result.hpp>

namespace npc::test {

namespace fs = std::filesystem;

// Where tests/support/rgw.sh wrote the running gateway's endpoint and keys.
[[nodiscard]] fs::path rgw_dir();

class RgwTenant {
public:
  // Creates a tenant with fresh keys and its bucket `bucket`.
  [[nodiscard]] Status create(const std::string& bucket);

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; } // http://127.0.0.1:PORT
  [[nodiscard]] int port() const;
  [[nodiscard]] const std::string& access_key() const { return access_key_; }
  [[nodiscard]] const std::string& secret_key() const { return secret_key_; }
  // The tenant's keys, us-east-1, endpoint().
  [[nodiscard]] storage::S3Config config() const;

private:
  std::string endpoint_;
  std::string access_key_;
  std::string secret_key_;
};

} // namespace npc::test
