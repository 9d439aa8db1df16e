// Instance-role credentials from the EC2 instance metadata service
// (IMDSv2), asked by load_s3_config when neither the environment nor the
// profile files have keys, against a scripted loopback stand-in for IMDS.

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_config.hpp>

#include <chrono>
#include <ctime>
#include <map>
#include <vector>
#include <memory>

#include <gtest/gtest.h>

#include "silent_port.hpp"

#include "fake_env.hpp"
#include "s3_server.hpp"
#include "scripted_http.hpp"
#include "temp_dir.hpp"

namespace npc::storage {
namespace {

using namespace std::chrono_literals;
using npc::test::http_response;
using npc::test::ScriptedHttpServer;

// Only detects a hang: IMDS gets two tries of at most 2 s each.
constexpr auto kImdsHangLimit = 15s;

constexpr const char* kRolePath = "/latest/meta-data/iam/security-credentials/";
constexpr const char* kRoleKeys = R"({"Code":"Success","LastUpdated":"2024-05-01T12:00:00Z","Type":"AWS-HMAC",
"AccessKeyId":"ASIAROLEKEY","SecretAccessKey":"role/secret+key","Token":"IQoJb3JpZ2luX2VjE//session==",
"Expiration":"2099-05-01T18:00:00Z"})";

class S3ConfigImds : public npc::test::TempDirTest {
protected:
  // No keys in the environment, no profile files: only IMDS is left.
  EnvLookup env() const { return npc::test::env_lookup(vars_); }
  std::string no_keys_prefix() const {
    return "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile 'default' "
           "aws_access_key_id and aws_secret_access_key in '" +
           dir().string() + "/.aws/credentials' or '" + dir().string() +
           "/.aws/config', or run on an EC2 instance with a role (";
  }
  // A client of `s3` signing with the role's keys from `imds`, as
  // load_s3_config finds them; nullptr (a failure added) when it cannot.
  std::unique_ptr<S3Client> role_client(const ScriptedHttpServer& imds, const ScriptedHttpServer& s3) {
    vars_ = {{"HOME", dir().string()},
             {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
             {"AWS_ENDPOINT_URL_S3", s3.endpoint()}};
    auto config = load_s3_config(env());
    if (!config) {
      ADD_FAILURE() << config.error();
      return nullptr;
    }
    auto client = S3Client::create(*config);
    if (!client) {
      ADD_FAILURE() << client.error();
      return nullptr;
    }
    return std::move(*client);
  }
  npc::test::FakeEnv vars_;
};

TEST_F(S3ConfigImds, TokenThenRoleThenKeysWithExactRequests) {
  ScriptedHttpServer imds({http_response(200, "OK", "TOKEN-abc=="), http_response(200, "OK", "build-role\n"),
                           http_response(200, "OK", kRoleKeys)});
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint() + "/"}};
  auto config = load_s3_config(env());
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->credentials.access_key_id, "ASIAROLEKEY");
  EXPECT_EQ(config->credentials.secret_access_key, "role/secret+key");
  EXPECT_EQ(config->credentials.session_token, "IQoJb3JpZ2luX2VjE//session==");
  EXPECT_EQ(config->region, "us-east-1");

  auto requests = imds.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].target, "/latest/api/token");
  EXPECT_EQ(requests[0].headers.at("x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_EQ(requests[0].headers.count("x-aws-ec2-metadata-token"), 0u);
  EXPECT_EQ(requests[1].method, "GET");
  EXPECT_EQ(requests[1].target, kRolePath);
  EXPECT_EQ(requests[1].headers.at("x-aws-ec2-metadata-token"), "TOKEN-abc==");
  EXPECT_EQ(requests[2].method, "GET");
  EXPECT_EQ(requests[2].target, std::string(kRolePath) + "build-role");
  EXPECT_EQ(requests[2].headers.at("x-aws-ec2-metadata-token"), "TOKEN-abc==");
}

TEST_F(S3ConfigImds, TheRoleKeysSignRequestsWithTheSessionToken) {
  ScriptedHttpServer imds({http_response(200, "OK", "T"), http_response(200, "OK", "r"),
                           http_response(200, "OK", kRoleKeys)});
  ScriptedHttpServer s3({http_response(200, "OK", "object bytes")});
  vars_ = {{"HOME", dir().string()},
           {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
           {"AWS_REGION", "eu-west-1"},
           {"AWS_ENDPOINT_URL_S3", s3.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_TRUE(config) << config.error();
  auto client = S3Client::create(*config);
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->get_object("bucket", "key", 100);
  ASSERT_TRUE(got) << got.error();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, "object bytes");
  auto requests = s3.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/bucket/key");
  EXPECT_EQ(requests[0].headers.at("x-amz-security-token"), "IQoJb3JpZ2luX2VjE//session==");
  EXPECT_EQ(requests[0].headers.at("authorization").rfind("AWS4-HMAC-SHA256 Credential=ASIAROLEKEY/", 0), 0u)
      << requests[0].headers.at("authorization");
  EXPECT_NE(requests[0].headers.at("authorization").find("/eu-west-1/s3/aws4_request"), std::string::npos);
}

// An instance role's keys as IMDS gives them, expiring at `expires`.
std::string role_keys(const std::string& key_id, std::chrono::system_clock::time_point expires) {
  std::time_t t = std::chrono::system_clock::to_time_t(expires);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(R"({"Code":"Success","AccessKeyId":")") + key_id +
         R"(","SecretAccessKey":"s","Token":"token-)" + key_id + R"(","Expiration":")" + when + R"("})";
}

std::string signed_by(const npc::test::RecordedRequest& request) {
  const std::string& auth = request.headers.at("authorization");
  auto start = auth.find("Credential=");
  if (start == std::string::npos) return "<no credential>";
  start += std::string("Credential=").size();
  return auth.substr(start, auth.find('/', start) - start);
}

// IMDS answering twice (token, role, keys): OLDKEY expiring at `first`,
// then NEWKEY at `second`.
std::vector<npc::test::ScriptedResponse> renewing_imds(std::chrono::system_clock::time_point first,
                                                       std::chrono::system_clock::time_point second) {
  std::vector<npc::test::ScriptedResponse> script;
  for (const auto& [key_id, expires] : {std::pair{"OLDKEY", first}, std::pair{"NEWKEY", second}}) {
    script.push_back(http_response(200, "OK", "T"));
    script.push_back(http_response(200, "OK", "r"));
    script.push_back(http_response(200, "OK", role_keys(key_id, expires)));
  }
  return script;
}

TEST_F(S3ConfigImds, KeysThatExpireWithinFiveMinutesAreRenewedBeforeARequest) {
  const auto now = std::chrono::system_clock::now();
  ScriptedHttpServer imds(renewing_imds(now + 2min, now + 6h));
  ScriptedHttpServer s3({http_response(200, "OK", "a"), http_response(200, "OK", "b")});
  vars_ = {{"HOME", dir().string()},
           {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
           {"AWS_ENDPOINT_URL_S3", s3.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_TRUE(config) << config.error();
  ASSERT_TRUE(config->credentials.expires.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*config->credentials.expires),
            std::chrono::system_clock::to_time_t(now + 2min));
  auto client = S3Client::create(*config);
  ASSERT_TRUE(client) << client.error();
  for (int i = 0; i < 2; ++i) {
    auto got = (*client)->get_object("bucket", "key", 100);
    ASSERT_TRUE(got) << got.error();
  }
  // Renewed once, before the first request; the second finds them fresh.
  EXPECT_EQ(imds.requests().size(), 6u);
  auto requests = s3.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& r : requests) {
    EXPECT_EQ(signed_by(r), "NEWKEY");
    EXPECT_EQ(r.headers.at("x-amz-security-token"), "token-NEWKEY");
  }
}

TEST_F(S3ConfigImds, ARequestRefusedForAnExpiredTokenIsMadeAgainWithRenewedKeys) {
  const auto now = std::chrono::system_clock::now();
  ScriptedHttpServer imds(renewing_imds(now + 6h, now + 6h));
  const std::string expired = "<Error><Code>ExpiredToken</Code><Message>The provided token has expired."
                              "</Message></Error>";
  ScriptedHttpServer s3({http_response(400, "Bad Request", expired), http_response(200, "OK", "bytes")});
  auto client = role_client(imds, s3);
  ASSERT_TRUE(client);
  auto got = client->get_object("bucket", "key", 100);
  ASSERT_TRUE(got) << got.error();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, "bytes");
  auto requests = s3.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(signed_by(requests[0]), "OLDKEY");
  EXPECT_EQ(signed_by(requests[1]), "NEWKEY");
  EXPECT_EQ(imds.requests().size(), 6u);
}

TEST_F(S3ConfigImds, KeysFromTheEnvironmentAreNeverRenewed) {
  const std::string expired = "<Error><Code>ExpiredToken</Code><Message>expired</Message></Error>";
  ScriptedHttpServer s3({http_response(400, "Bad Request", expired)});
  vars_ = {{"HOME", dir().string()},
           {"AWS_ACCESS_KEY_ID", "AK"},
           {"AWS_SECRET_ACCESS_KEY", "SK"},
           {"AWS_SESSION_TOKEN", "ST"},
           {"AWS_ENDPOINT_URL_S3", s3.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_TRUE(config) << config.error();
  EXPECT_FALSE(config->renew_credentials);
  auto client = S3Client::create(*config);
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->get_object("bucket", "key", 100);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().find("400 ExpiredToken"), std::string::npos) << got.error();
  EXPECT_EQ(s3.requests().size(), 1u);
}

TEST_F(S3ConfigImds, KeysFromTheEnvironmentOrProfileComeFirst) {
  ScriptedHttpServer imds({http_response(200, "OK", "T")});
  vars_ = {{"HOME", dir().string()},
           {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
           {"AWS_ACCESS_KEY_ID", "AK"},
           {"AWS_SECRET_ACCESS_KEY", "SK"}};
  auto config = load_s3_config(env());
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->credentials.access_key_id, "AK");
  EXPECT_EQ(imds.requests().size(), 0u);
}

TEST_F(S3ConfigImds, DisabledIsNotAsked) {
  ScriptedHttpServer imds({http_response(200, "OK", "T")});
  for (std::string value : {"true", "TRUE", "True"}) {
    vars_ = {{"HOME", dir().string()},
             {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
             {"AWS_EC2_METADATA_DISABLED", value}};
    auto config = load_s3_config(env());
    ASSERT_FALSE(config);
    EXPECT_EQ(config.error(), no_keys_prefix() + "instance metadata not asked: AWS_EC2_METADATA_DISABLED=true)");
  }
  EXPECT_EQ(imds.requests().size(), 0u);
}

TEST_F(S3ConfigImds, RefusedTokenIsNamedAndImdsV1IsNotTried) {
  ScriptedHttpServer imds({http_response(401, "Unauthorized", ""), http_response(200, "OK", "role")});
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error(), no_keys_prefix() + "instance metadata at " + imds.endpoint() +
                                ": PUT /latest/api/token answered 401 (no IMDSv2 session token; IMDSv1 is not "
                                "tried))");
  ASSERT_EQ(imds.requests().size(), 1u);
  EXPECT_EQ(imds.requests()[0].method, "PUT");
}

TEST_F(S3ConfigImds, NoRoleAttached) {
  ScriptedHttpServer imds({http_response(200, "OK", "T"), http_response(404, "Not Found", "")});
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error(), no_keys_prefix() + "instance metadata at " + imds.endpoint() +
                                ": no instance role is attached (GET " + kRolePath + " answered 404))");
  EXPECT_EQ(imds.requests().size(), 2u);
}

TEST_F(S3ConfigImds, RoleWithoutKeysIsNamed) {
  ScriptedHttpServer imds({http_response(200, "OK", "T"), http_response(200, "OK", "r"),
                           http_response(200, "OK", R"({"Code":"AssumeRoleUnauthorizedAccess"})")});
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()}};
  auto config = load_s3_config(env());
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error(), no_keys_prefix() + "instance metadata at " + imds.endpoint() +
                                ": the keys of role 'r' are not available (Code AssumeRoleUnauthorizedAccess))");
}

TEST_F(S3ConfigImds, ClosedPortIsTriedTwiceAndNamed) {
  int port = npc::test::free_loopback_port();
  ASSERT_NE(port, 0);
  std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint}};
  auto started = std::chrono::steady_clock::now();
  auto config = load_s3_config(env());
  EXPECT_LT(std::chrono::steady_clock::now() - started, kImdsHangLimit);
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error(),
            no_keys_prefix() + "instance metadata at " + endpoint + ": not reachable: Connection refused)");
}

// A server that accepts and never answers: each of the two tries ends at
// the 2 s total limit.
TEST_F(S3ConfigImds, SilentServerTimesOut) {
  ScriptedHttpServer imds({std::nullopt, std::nullopt});
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()}};
  auto started = std::chrono::steady_clock::now();
  auto config = load_s3_config(env());
  EXPECT_LT(std::chrono::steady_clock::now() - started, kImdsHangLimit);
  ASSERT_FALSE(config);
  std::string prefix = no_keys_prefix() + "instance metadata at " + imds.endpoint() + ": not reachable: ";
  EXPECT_EQ(config.error().rfind(prefix, 0), 0u) << config.error();
  EXPECT_NE(config.error().find("timed out"), std::string::npos) << config.error();
  EXPECT_EQ(config.error().find('\n'), std::string::npos);
  EXPECT_EQ(imds.requests().size(), 2u);
}

// A metadata address that never answers the connect (as off EC2, where
// nothing routes it): each of the two tries ends at the 1 s connect
// timeout, and one line names the endpoint.
TEST_F(S3ConfigImds, AnEndpointThatNeverAnswersIsBounded) {
  test::SilentPort silent;
  ASSERT_FALSE(HasFatalFailure());
  vars_ = {{"HOME", dir().string()}, {"AWS_EC2_METADATA_SERVICE_ENDPOINT", silent.endpoint()}};
  auto started = std::chrono::steady_clock::now();
  auto config = load_s3_config(env());
  EXPECT_LT(std::chrono::steady_clock::now() - started, kImdsHangLimit);
  ASSERT_FALSE(config);
  std::string prefix = no_keys_prefix() + "instance metadata at " + silent.endpoint() + ": ";
  EXPECT_EQ(config.error().rfind(prefix, 0), 0u) << config.error();
  // curl says "Connection timeout after 300 ms" or "Failed to connect to
  // ... after 301 ms: Timeout was reached", depending on which timer fired.
  EXPECT_NE(config.error().find("imeout"), std::string::npos) << config.error();
  EXPECT_EQ(config.error().find('\n'), std::string::npos);
}

} // namespace
} // namespace npc::storage
