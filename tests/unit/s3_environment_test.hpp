#pragma once
// A test against the run's S3 server whose programs find it as users' do:
// the credentials and endpoint in the environment, as every program reads
// them, and nothing from this machine's AWS set-up (no profile, config,
// credentials file or instance metadata).

#include <memory>
#include <vector>

#include "s3_server.hpp"
#include "scoped_env.hpp"

namespace npc::test {

class S3EnvironmentTest : public S3ServerTest {
protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    set("AWS_ACCESS_KEY_ID", server_.access_key().c_str());
    set("AWS_SECRET_ACCESS_KEY", server_.secret_key().c_str());
    set("AWS_REGION", "us-east-1");
    set("AWS_ENDPOINT_URL_S3", server_.endpoint().c_str());
    set("AWS_SESSION_TOKEN", nullptr);
    set("AWS_PROFILE", nullptr);
    set("AWS_CONFIG_FILE", (dir() / "no-aws-config").string().c_str());
    set("AWS_SHARED_CREDENTIALS_FILE", (dir() / "no-aws-credentials").string().c_str());
    set("AWS_EC2_METADATA_DISABLED", "true");
  }

private:
  void set(const char* name, const char* value) { env_.emplace_back(std::make_unique<ScopedEnv>(name, value)); }
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

} // namespace npc::test
