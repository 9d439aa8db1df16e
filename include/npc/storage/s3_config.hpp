#pragma once
// Where S3 is and who we are to it, from the standard AWS environment
// variables and the shared ~/.aws/credentials and ~/.aws/config files, read
// the way the AWS CLI reads them, and last from the EC2 instance metadata
// service (IMDSv2) when the instance has a role.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <npc/util/result.hpp>

namespace npc::storage {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token; // "" when the keys are long-lived
  // When temporary keys stop working (an instance role's "Expiration");
  // nullopt for keys that do not expire, or whose end is not told.
  std::optional<std::chrono::system_clock::time_point> expires = std::nullopt;
};

// A fresh set of temporary credentials (an instance role's, from IMDS).
using CredentialsRenewal = std::function<Result<S3Credentials>()>;

struct S3Config {
  S3Credentials credentials;
  std::string region = "us-east-1";
  // "" for AWS itself (virtual-hosted https://BUCKET.s3.REGION.amazonaws.com);
  // otherwise the base URL of an S3-compatible server, addressed path-style.
  std::string endpoint;
  // Set when the credentials are temporary keys that can be fetched again:
  // the client renews them before they expire (s3_client.hpp).
  CredentialsRenewal renew_credentials = nullptr;
};

// A variable of the environment, or nothing when unset. Injected so that a
// test reads its own values without touching the process environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
[[nodiscard]] EnvLookup process_environment();

// Credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
// else the profile AWS_PROFILE (default "default") in the credentials file
// (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), else in the config
// file (AWS_CONFIG_FILE or ~/.aws/config), else the instance role's
// temporary keys from IMDSv2 at AWS_EC2_METADATA_SERVICE_ENDPOINT (default
// http://169.254.169.254), unless AWS_EC2_METADATA_DISABLED=true. IMDS gets
// about a second to answer (two tries, each at most 2 s): a machine without
// it is not held up. There is no IMDSv1 fallback. The role's keys last
// hours; the config carries how to fetch them again, and a client renews
// them within 5 minutes of their Expiration (when IMDS promises a fresh
// set) and once after a request refused for an expired token, so a long
// run keeps working. Region: AWS_REGION,
// AWS_DEFAULT_REGION, the profile's region, us-east-1. Endpoint:
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url.
[[nodiscard]] Result<S3Config> load_s3_config(const EnvLookup& env);

} // namespace npc::storage
