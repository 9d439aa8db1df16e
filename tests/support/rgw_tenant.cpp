#include "rgw_tenant.hpp"

#include <cstdlib>

#include <npc/util/fs.hpp>
#include <npc/util/random.hpp>
#include <npc/util/strings.hpp>

#include "process.hpp"

namespace npc::test {

namespace {

std::string random_word(std::size_t length, std::string_view alphabet) {
  std::string word;
  for (std::size_t i = 0; i < length; ++i) word += alphabet[static_cast<std::size_t>(util::random_between(0, static_cast<std::int64_t>(alphabet.size()) - 1))];
  return word;
}

// A signed PUT with curl's own SigV4 (curl is what rgw.sh needs too). Debian
// 12's curl (7.88) neither sends the payload hash the gateway requires nor
// sorts the query in what it signs: the header is given here, and callers
// pass the query's parameters in order.
RunResult signed_put(const std::string& url, const std::string& access_key, const std::string& secret_key) {
  return run({"curl", "--silent", "--show-error", "--fail-with-body", "--max-time", "20", "--aws-sigv4",
              "aws:amz:us-east-1:s3", "--user", access_key + ":" + secret_key, "--header",
              "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--request", "PUT", url});
}

} // namespace

fs::path rgw_dir() {
  if (const char* dir = std::getenv("NPC_TEST_RGW_DIR"); dir && *dir) return dir;
  return NPC_TEST_RGW_DIR;
}

Status RgwTenant::create(const std::string& bucket) {
  const fs::path dir = rgw_dir();
  auto endpoint = util::read_file(dir / "endpoint");
  auto admin_key = util::read_file(dir / "access_key");
  auto admin_secret = util::read_file(dir / "secret_key");
  if (!endpoint || !admin_key || !admin_secret)
    return fail("the test run's RADOS Gateway is not running (no " + (dir / "endpoint").string() +
                "): run the tests through ctest, whose fixture \"rgw\" starts it, or start it with "
                "'tests/support/rgw.sh start " + dir.string() + "'");
  endpoint_ = std::string(util::trim(*endpoint));
  const std::string alnum = "abcdefghijklmnopqrstuvwxyz0123456789";
  const std::string tenant = "t" + random_word(15, alnum);
  access_key_ = random_word(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  secret_key_ = random_word(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");

  // The admin API (the gateway's admin user has the users capability).
  auto user = signed_put(endpoint_ + "/admin/user?access-key=" + access_key_ + "&display-name=" + tenant +
                             "&secret-key=" + secret_key_ + "&tenant=" + tenant + "&uid=tester",
                         std::string(util::trim(*admin_key)), std::string(util::trim(*admin_secret)));
  if (user.exit_code != 0) return fail("the RADOS Gateway at " + endpoint_ + " did not create a tenant: " + user.describe());
  // An unqualified bucket name is the requesting user's tenant's.
  auto made = signed_put(endpoint_ + "/" + bucket, access_key_, secret_key_);
  if (made.exit_code != 0)
    return fail("the RADOS Gateway at " + endpoint_ + " did not create bucket " + bucket + ": " + made.describe());
  return ok_status();
}

int RgwTenant::port() const {
  auto colon = endpoint_.rfind(':');
  return colon == std::string::npos ? 0 : std::atoi(endpoint_.c_str() + colon + 1);
}

storage::S3Config RgwTenant::config() const {
  storage::S3Config config;
  config.credentials.access_key_id = access_key_;
  config.credentials.secret_access_key = secret_key_;
  config.region = "us-east-1";
  config.endpoint = endpoint_;
  return config;
}

} // namespace npc::test
