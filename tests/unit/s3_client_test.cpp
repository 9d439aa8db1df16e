// The S3 client against a real S3 server (s3rver), plus the pieces that
// need none: URLs, XML, configuration, and retries against a tiny scripted
// HTTP server.

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_url.hpp>

#include <cerrno>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include <npc/util/sha256.hpp>

#include "fake_env.hpp"
#include "files.hpp"
#include "s3_server.hpp"
#include "scripted_http.hpp"

namespace npc::storage {
namespace {

using npc::test::http_response;
using npc::test::kS3TestBucket;
using npc::test::ScriptedHttpServer;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// ---- URLs ------------------------------------------------------------------

TEST(S3Url, ParsesBucketAndPrefix) {
  auto a = parse_s3_url("s3://my-bucket.data/neuron/cache");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->bucket, "my-bucket.data");
  EXPECT_EQ(a->prefix, "neuron/cache");
  auto b = parse_s3_url("s3://abc");
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->bucket, "abc");
  EXPECT_EQ(b->prefix, "");
  auto c = parse_s3_url("s3://abc/");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->prefix, "");
}

TEST(S3Url, RejectsBadUrls) {
  EXPECT_EQ(parse_s3_url("s3:///prefix").error(), "S3 URL 's3:///prefix' names no bucket (write s3://BUCKET/PREFIX)");
  EXPECT_EQ(parse_s3_url("http://b/x").error(), "S3 URL 'http://b/x' does not start with s3:// (write s3://BUCKET/PREFIX)");
  EXPECT_EQ(parse_s3_url("s3://My_Bucket/x").error(),
            "S3 bucket name 'My_Bucket' in s3://My_Bucket/x may only hold a-z, 0-9, '.' and '-'");
  EXPECT_EQ(parse_s3_url("s3://ab").error(), "S3 bucket name 'ab' in s3://ab must be 3 to 63 characters long");
  EXPECT_EQ(parse_s3_url("s3://-abc").error(), "S3 bucket name '-abc' in s3://-abc must start and end with a letter or digit");
  EXPECT_EQ(parse_s3_url("s3://abc/a//b").error(), "S3 URL 's3://abc/a//b' has an empty folder name ('//') in its prefix");
}

TEST(S3Url, EncodesLikeS3) {
  EXPECT_EQ(s3_uri_encode("a b+c/d~e_f.g-h\xC3\xBC", EncodeSlash::no), "a%20b%2Bc/d~e_f.g-h%C3%BC");
  EXPECT_EQ(s3_uri_encode("a/b=c&d", EncodeSlash::yes), "a%2Fb%3Dc%26d");
}

// ---- XML -------------------------------------------------------------------

TEST(S3Xml, ParsesAListingPage) {
  std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>2</KeyCount>
<IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;en</NextContinuationToken>
<Contents><Key>a &amp; b&#x20AC;</Key><LastModified>2024-05-01T12:34:56.789Z</LastModified><Size>12</Size></Contents>
<Contents><Key>c</Key><LastModified>2024-05-01T00:00:00Z</LastModified><Size>0</Size></Contents>
<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes></ListBucketResult>)";
  auto page = parse_list_objects_v2(xml);
  ASSERT_TRUE(page) << page.error();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a & b\xE2\x82\xAC");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(page->objects[0].modified.time_since_epoch()).count(),
            1714566896789);
  EXPECT_EQ(page->objects[1].key, "c");
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"d/"});
  EXPECT_EQ(page->continuation_token, std::optional<std::string>("tok&en"));
}

TEST(S3Xml, ParsesAnError) {
  auto e = parse_s3_error("<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Reduce &lt;rate&gt;</Message></Error>");
  EXPECT_EQ(e.code, "SlowDown");
  EXPECT_EQ(e.message, "Reduce <rate>");
  EXPECT_EQ(parse_s3_error("<html>bad gateway</html>").code, "");
}

// ---- Configuration -----------------------------------------------------------

class S3ConfigTest : public npc::test::TempDirTest {
protected:
  EnvLookup env() const { return npc::test::env_lookup(vars_); }
  npc::test::FakeEnv vars_;
};

TEST_F(S3ConfigTest, EnvironmentWins) {
  vars_ = {{"HOME", dir().string()}, {"AWS_ACCESS_KEY_ID", "AK"}, {"AWS_SECRET_ACCESS_KEY", "SK"},
           {"AWS_SESSION_TOKEN", "TOK"}, {"AWS_DEFAULT_REGION", "eu-west-1"},
           {"AWS_ENDPOINT_URL", "http://other:1"}, {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000/"}};
  auto c = load_s3_config(env());
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->credentials.access_key_id, "AK");
  EXPECT_EQ(c->credentials.secret_access_key, "SK");
  EXPECT_EQ(c->credentials.session_token, "TOK");
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9000");
}

TEST_F(S3ConfigTest, ReadsTheProfileFromTheSharedFiles) {
  npc::test::write_text(dir() / ".aws" / "credentials",
                        "[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFS\n\n"
                        "# team account\n[team]\naws_access_key_id=TEAM\naws_secret_access_key = TEAMS \n"
                        "aws_session_token = TT\n");
  npc::test::write_text(dir() / ".aws" / "config",
                        "[default]\nregion = us-west-2\n[profile team]\nregion = ap-south-1\ns3 =\n"
                        "  addressing_style = path\nendpoint_url = http://localhost:4566\n");
  vars_ = {{"HOME", dir().string()}, {"AWS_PROFILE", "team"}};
  auto c = load_s3_config(env());
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->credentials.access_key_id, "TEAM");
  EXPECT_EQ(c->credentials.secret_access_key, "TEAMS");
  EXPECT_EQ(c->credentials.session_token, "TT");
  EXPECT_EQ(c->region, "ap-south-1");
  EXPECT_EQ(c->endpoint, "http://localhost:4566");

  vars_ = {{"HOME", dir().string()}};
  auto d = load_s3_config(env());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->credentials.access_key_id, "DEF");
  EXPECT_EQ(d->region, "us-west-2");
  EXPECT_EQ(d->endpoint, "");

  // Other paths for the files.
  npc::test::write_text(dir() / "creds", "[x]\naws_access_key_id = X\naws_secret_access_key = XS\n");
  vars_ = {{"HOME", "/nonexistent"}, {"AWS_SHARED_CREDENTIALS_FILE", (dir() / "creds").string()}, {"AWS_PROFILE", "x"}};
  auto e = load_s3_config(env());
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->credentials.access_key_id, "X");
  EXPECT_EQ(e->region, "us-east-1");
}

TEST_F(S3ConfigTest, MissingCredentialsNameWhereWeLooked) {
  vars_ = {{"HOME", dir().string()}, {"AWS_ACCESS_KEY_ID", "only-the-id"}, {"AWS_EC2_METADATA_DISABLED", "true"}};
  auto c = load_s3_config(env());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile "
                       "'default' aws_access_key_id and aws_secret_access_key in '" +
                           dir().string() + "/.aws/credentials' or '" + dir().string() +
                           "/.aws/config', or run on an EC2 instance with a role (instance metadata not asked: "
                           "AWS_EC2_METADATA_DISABLED=true)");
  vars_ = {{"HOME", dir().string()}, {"AWS_PROFILE", "nope"}};
  EXPECT_EQ(load_s3_config(env()).error(), "AWS_PROFILE=nope but no profile 'nope' is in '" + dir().string() +
                                               "/.aws/credentials' or '" + dir().string() + "/.aws/config'");
}

// ---- Against a real S3 server (the run's RADOS Gateway) ----------------------

class S3ClientTest : public npc::test::S3ServerTest {
protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    if (HasFatalFailure()) return;
    auto c = S3Client::create(server_.config());
    ASSERT_TRUE(c) << c.error();
    client_ = std::move(*c);
  }
  std::unique_ptr<S3Client> client_;
};

// What AWS S3 does and s3rver does not: a create-only PUT (If-None-Match: *)
// of a key that exists is refused (412), and the first object stays.
TEST_F(S3ClientTest, ASecondCreateOnlyPutIsRefusedAndTheFirstObjectStays) {
  auto first = client_->put_object(kS3TestBucket, "entry/lock", "first", {.if_exists = IfExists::keep});
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(*first, PutOutcome::written);
  auto second = client_->put_object(kS3TestBucket, "entry/lock", "second", {.if_exists = IfExists::keep});
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(*second, PutOutcome::already_exists);
  EXPECT_EQ(client_->last_attempts(), 1);
  auto kept = client_->get_object(kS3TestBucket, "entry/lock", 100);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(kept->value_or("(absent)"), "first");
}

// A PUT If-Match an ETag replaces only the object of that ETag: one that
// was replaced since the ETag was read, or removed, is not written over.
TEST_F(S3ClientTest, APutIfMatchWritesOnlyOverTheObjectOfThatETag) {
  ASSERT_TRUE(client_->put_object(kS3TestBucket, "entry/lock", "stale"));
  auto head = client_->head_object(kS3TestBucket, "entry/lock");
  ASSERT_TRUE(head && *head) << (head ? "absent" : head.error());
  // Bare: the RADOS Gateway of Ceph 16 refuses the quoted form (S3Storage
  // finds out which form its server takes).
  std::string etag = (*head)->etag;
  std::erase(etag, '"');
  ASSERT_FALSE(etag.empty());
  // Another taker replaced it meanwhile.
  ASSERT_TRUE(client_->put_object(kS3TestBucket, "entry/lock", "the first taker's", {.if_match = etag}));
  auto late = client_->put_object(kS3TestBucket, "entry/lock", "the second taker's", {.if_match = etag});
  ASSERT_TRUE(late) << late.error();
  EXPECT_EQ(*late, PutOutcome::not_matched);
  auto kept = client_->get_object(kS3TestBucket, "entry/lock", 100);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(kept->value_or("(absent)"), "the first taker's");
  // Removed meanwhile: nothing is written.
  ASSERT_TRUE(client_->delete_object(kS3TestBucket, "entry/lock"));
  auto gone = client_->put_object(kS3TestBucket, "entry/lock", "the second taker's", {.if_match = etag});
  ASSERT_TRUE(gone) << gone.error();
  EXPECT_EQ(*gone, PutOutcome::not_matched);
  auto absent = client_->get_object(kS3TestBucket, "entry/lock", 100);
  ASSERT_TRUE(absent) << absent.error();
  EXPECT_FALSE(absent->has_value());
}

// And a request signed with a wrong secret is refused (403), said as such in
// one line, and not retried: no attempt can succeed.
TEST_F(S3ClientTest, AWrongSecretIsRefusedAndSaidInOneLine) {
  S3Config config = server_.config();
  config.credentials.secret_access_key += "x";
  auto c = S3Client::create(config);
  ASSERT_TRUE(c) << c.error();
  auto got = (*c)->get_object(kS3TestBucket, "anything", 100);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "S3 refused the credentials for GetObject on s3://test-bucket/anything at " + server_.endpoint() +
                             " (403 SignatureDoesNotMatch): the access key or the secret key is wrong "
                             "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)");
  EXPECT_EQ((*c)->last_attempts(), 1);
}

TEST_F(S3ClientTest, PutGetHeadDeleteRoundTrip) {
  const std::string bytes("head\0tail \xff\n", 12);
  for (std::string key : {"plain", "dir/a file+plus \xC3\xBC\xE2\x82\xAC.bin", "odd/~!$&'()*,;=:@[]"}) {
    SCOPED_TRACE(key);
    auto put = client_->put_object(kS3TestBucket, key, bytes);
    ASSERT_TRUE(put) << put.error();
    EXPECT_EQ(*put, PutOutcome::written);
    auto got = client_->get_object(kS3TestBucket, key, 1024);
    ASSERT_TRUE(got) << got.error();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(**got, bytes);
    auto head = client_->head_object(kS3TestBucket, key);
    ASSERT_TRUE(head) << head.error();
    ASSERT_TRUE(head->has_value());
    EXPECT_EQ((*head)->size, bytes.size());
    auto age = std::chrono::system_clock::now() - (*head)->modified;
    EXPECT_LT(std::chrono::abs(age), 120s);
    auto listed = client_->list_all(kS3TestBucket, {.prefix = key});
    ASSERT_TRUE(listed) << listed.error();
    ASSERT_EQ(listed->objects.size(), 1u);
    EXPECT_EQ(listed->objects[0].key, key);
    EXPECT_EQ(listed->objects[0].size, bytes.size());
    ASSERT_TRUE(client_->delete_object(kS3TestBucket, key));
    auto gone = client_->get_object(kS3TestBucket, key, 1024);
    ASSERT_TRUE(gone) << gone.error();
    EXPECT_FALSE(gone->has_value());
    auto gone_head = client_->head_object(kS3TestBucket, key);
    ASSERT_TRUE(gone_head) << gone_head.error();
    EXPECT_FALSE(gone_head->has_value());
  }
  EXPECT_TRUE(client_->delete_object(kS3TestBucket, "never-was"));
}

TEST_F(S3ClientTest, GetIsBounded) {
  ASSERT_TRUE(client_->put_object(kS3TestBucket, "big", std::string(5000, 'x')));
  auto got = client_->get_object(kS3TestBucket, "big", 4999);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "s3://test-bucket/big is larger than 4999 bytes");
}

TEST_F(S3ClientTest, StreamsAMultiMegabyteFileBothWays) {
  std::string data(6 * 1024 * 1024 + 123, '\0');
  std::mt19937 rng(42);
  for (char& c : data) c = static_cast<char>(rng());
  npc::test::write_text(dir() / "up.bin", data);
  auto put = client_->put_file(kS3TestBucket, "files/up.bin", dir() / "up.bin");
  ASSERT_TRUE(put) << put.error();
  auto head = client_->head_object(kS3TestBucket, "files/up.bin");
  ASSERT_TRUE(head && head->has_value());
  EXPECT_EQ((*head)->size, data.size());
  auto got = client_->get_file(kS3TestBucket, "files/up.bin", dir() / "down.bin");
  ASSERT_TRUE(got) << got.error();
  EXPECT_TRUE(*got);
  EXPECT_EQ(fs::file_size(dir() / "down.bin"), data.size());
  EXPECT_EQ(npc::test::file_sha256(dir() / "down.bin"), util::sha256_hex(data));
  auto absent = client_->get_file(kS3TestBucket, "files/none", dir() / "none.bin");
  ASSERT_TRUE(absent) << absent.error();
  EXPECT_FALSE(*absent);
  EXPECT_FALSE(fs::exists(dir() / "none.bin"));
}

TEST_F(S3ClientTest, ListsWithDelimiterAndPages) {
  for (std::string key : {"top/a", "top/b/1", "top/b/2", "top/c/1", "topx", "other"})
    ASSERT_TRUE(client_->put_object(kS3TestBucket, key, key));
  auto page = client_->list_objects_v2(kS3TestBucket, {.prefix = "top/", .delimiter = "/"});
  ASSERT_TRUE(page) << page.error();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "top/a");
  EXPECT_EQ(page->objects[0].size, 5u);
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"top/b/", "top/c/"}));
  EXPECT_FALSE(page->continuation_token);

  constexpr int kKeys = 1100;
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(client_->put_object(kS3TestBucket, "many/" + std::to_string(i), "x"));
  auto first = client_->list_objects_v2(kS3TestBucket, {.prefix = "many/"});
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->objects.size(), 1000u);
  ASSERT_TRUE(first->continuation_token);
  auto second = client_->list_objects_v2(kS3TestBucket, {.prefix = "many/", .continuation_token = *first->continuation_token});
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->objects.size(), 100u);
  EXPECT_FALSE(second->continuation_token);
  auto all = client_->list_all(kS3TestBucket, {.prefix = "many/"});
  ASSERT_TRUE(all) << all.error();
  std::set<std::string> keys;
  for (const auto& o : all->objects) keys.insert(o.key);
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(kKeys));
  EXPECT_EQ(keys.count("many/1099"), 1u);
}

TEST_F(S3ClientTest, MetadataRoundTripAndCopyInPlace) {
  auto put = client_->put_object(kS3TestBucket, "m/obj", "body", {.metadata = {{"last-use", "1700000000"}, {"owner", "a b"}}});
  ASSERT_TRUE(put) << put.error();
  auto head = client_->head_object(kS3TestBucket, "m/obj");
  ASSERT_TRUE(head && head->has_value());
  EXPECT_EQ((*head)->metadata, (S3Metadata{{"last-use", "1700000000"}, {"owner", "a b"}}));

  auto copied = client_->copy_object(kS3TestBucket, "m/obj", "m/obj", S3Metadata{{"last-use", "1800000000"}});
  ASSERT_TRUE(copied) << copied.error();
  head = client_->head_object(kS3TestBucket, "m/obj");
  ASSERT_TRUE(head && head->has_value());
  EXPECT_EQ((*head)->metadata, (S3Metadata{{"last-use", "1800000000"}}));
  auto body = client_->get_object(kS3TestBucket, "m/obj", 100);
  ASSERT_TRUE(body && body->has_value());
  EXPECT_EQ(**body, "body");

  auto bad = client_->put_object(kS3TestBucket, "m/x", "b", {.metadata = {{"Upper", "v"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "S3 metadata 'Upper' for s3://test-bucket/m/x must be a lower-case name (a-z 0-9 - _) with a "
                         "printable ASCII value");
}

// s3rver 3.7.1 reads If-None-Match only on GET/HEAD (answering 304); on PUT
// it ignores it and overwrites. AWS S3 answers 412 there (since 2024), which
// put_object reports as already_exists. So against s3rver the second create
// "succeeds" and replaces the content: what the remote lock's read-back is
// for (remote_lock.hpp), on servers that act so.
class S3ClientOnS3rverTest : public S3ClientTest {
protected:
  [[nodiscard]] npc::test::S3Backend backend() const override { return npc::test::S3Backend::s3rver; }
};

TEST_F(S3ClientOnS3rverTest, ConditionalCreateAsS3rverDoesIt) {
  S3PutOptions create_only{.if_exists = IfExists::keep};
  auto first = client_->put_object(kS3TestBucket, "lock", "one", create_only);
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(*first, PutOutcome::written);
  auto second = client_->put_object(kS3TestBucket, "lock", "two", create_only);
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(*second, PutOutcome::written);
  auto body = client_->get_object(kS3TestBucket, "lock", 100);
  ASSERT_TRUE(body && body->has_value());
  EXPECT_EQ(**body, "two");
}

// An unknown key is refused (a wrong secret too:
// AWrongSecretIsRefusedAndSaidInOneLine).
TEST_F(S3ClientTest, UnknownAccessKeyIsDeniedWithTheObjectNamed) {
  auto config = server_.config();
  config.credentials.access_key_id = "NOBODY";
  auto client = S3Client::create(config);
  ASSERT_TRUE(client) << client.error();
  auto put = (*client)->put_object(kS3TestBucket, "k/x", "b");
  ASSERT_FALSE(put);
  // A wrong key is said to be wrong, not a missing permission.
  EXPECT_TRUE(put.error().starts_with("S3 refused the credentials for PutObject on s3://test-bucket/k/x at "))
      << put.error();
  EXPECT_TRUE(put.error().ends_with(" (403 InvalidAccessKeyId): the access key or the secret key is wrong "
                                    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"))
      << put.error();
  EXPECT_EQ((*client)->last_attempts(), 1);
}

TEST_F(S3ClientTest, MissingBucketIsNamed) {
  auto got = client_->get_object("no-such-bucket", "k", 10);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "S3 bucket no-such-bucket does not exist at " + server_.endpoint() + " (404 NoSuchBucket)");
  auto listed = client_->list_objects_v2("no-such-bucket", {});
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error(), "S3 bucket no-such-bucket does not exist at " + server_.endpoint() + " (404 NoSuchBucket)");
}

// The probe a program makes before long work tells a usable bucket from
// keys refused and a bucket that is not there, in the request's own line.
TEST_F(S3ClientTest, AProbeTellsAUsableBucketFromWrongKeysAndAMissingBucket) {
  Probe usable = client_->probe(kS3TestBucket, "team/");
  EXPECT_EQ(usable.reach, Reach::usable) << usable.detail;
  EXPECT_EQ(usable.detail, "");

  S3Config config = server_.config();
  config.credentials.secret_access_key += "x";
  auto wrong = S3Client::create(config);
  ASSERT_TRUE(wrong) << wrong.error();
  Probe refused = (*wrong)->probe(kS3TestBucket, "team/");
  EXPECT_EQ(refused.reach, Reach::credentials_refused);
  EXPECT_EQ(refused.detail, "S3 refused the credentials for ListObjectsV2 on s3://test-bucket/team/ at " +
                                server_.endpoint() +
                                " (403 SignatureDoesNotMatch): the access key or the secret key is wrong "
                                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)");

  Probe missing = client_->probe("no-such-bucket", "team/");
  EXPECT_EQ(missing.reach, Reach::missing);
  EXPECT_EQ(missing.detail, "S3 bucket no-such-bucket does not exist at " + server_.endpoint() + " (404 NoSuchBucket)");
}

// ---- Without a server --------------------------------------------------------

// A permission missing, no answer at all, and a server failing are each a
// reach of their own; the probe is one LIST of at most one key.
TEST(S3ClientNoServer, AProbeTellsADeniedListFromNoAnswerAndAFailingServer) {
  ScriptedHttpServer denying({http_response(
      403, "Forbidden", "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")});
  S3Config config{{"AK", "SK", ""}, "us-east-1", denying.endpoint()};
  auto client = S3Client::create(config, {.max_attempts = 2, .base_backoff = 10ms, .max_backoff = 20ms});
  ASSERT_TRUE(client) << client.error();
  Probe denied = (*client)->probe("bucket", "team/");
  EXPECT_EQ(denied.reach, Reach::access_denied);
  EXPECT_EQ(denied.detail, "S3 denied ListObjectsV2 on s3://bucket/team/ (403 AccessDenied): check the credentials' "
                           "permissions");
  ASSERT_EQ(denying.requests().size(), 1u);
  EXPECT_EQ(denying.requests()[0].method, "GET");
  EXPECT_EQ(denying.requests()[0].target, "/bucket?list-type=2&max-keys=1&prefix=team%2F");

  const std::string internal = http_response(500, "Internal Server Error", "<Error><Code>InternalError</Code></Error>");
  ScriptedHttpServer failing({internal, internal});
  config.endpoint = failing.endpoint();
  client = S3Client::create(config, {.max_attempts = 2, .base_backoff = 10ms, .max_backoff = 20ms});
  ASSERT_TRUE(client) << client.error();
  Probe failed = (*client)->probe("bucket", "team/");
  EXPECT_EQ(failed.reach, Reach::failed);
  EXPECT_EQ(failed.detail, "S3 ListObjectsV2 on s3://bucket/team/ at " + failing.endpoint() +
                               " failed (500 InternalError) (after 2 attempts)");

  int port = npc::test::free_loopback_port();
  ASSERT_NE(port, 0);
  config.endpoint = "http://127.0.0.1:" + std::to_string(port);
  client = S3Client::create(config, {.max_attempts = 2, .base_backoff = 10ms, .max_backoff = 20ms});
  ASSERT_TRUE(client) << client.error();
  Probe silent = (*client)->probe("bucket", "team/");
  EXPECT_EQ(silent.reach, Reach::unreachable);
  EXPECT_EQ(silent.detail, "cannot reach S3 endpoint " + config.endpoint + ": Connection refused (after 2 attempts)");
}

TEST(S3ClientNoServer, UnreachableEndpointFailsFastAndNamesIt) {
  int port = npc::test::free_loopback_port();
  ASSERT_NE(port, 0);
  S3Config config{{"AK", "SK", ""}, "us-east-1", "http://127.0.0.1:" + std::to_string(port)};
  auto client = S3Client::create(config, {.max_attempts = 3, .base_backoff = 20ms, .max_backoff = 50ms});
  ASSERT_TRUE(client) << client.error();
  auto started = std::chrono::steady_clock::now();
  auto got = (*client)->get_object("bucket", "key", 10);
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "cannot reach S3 endpoint http://127.0.0.1:" + std::to_string(port) +
                             ": Connection refused (after 3 attempts)");
  EXPECT_EQ((*client)->last_attempts(), 3);
  EXPECT_LT(took, 5s);
}

TEST(S3ClientNoServer, AwsUrlsAreVirtualHosted) {
  auto client = S3Client::create(S3Config{{"AK", "SK", ""}, "eu-central-1", ""});
  ASSERT_TRUE(client) << client.error();
  EXPECT_EQ((*client)->object_url("bucket", "a b/c+d"), "https://bucket.s3.eu-central-1.amazonaws.com/a%20b/c%2Bd");
  EXPECT_EQ((*client)->object_url("dotted.bucket", "k"), "https://s3.eu-central-1.amazonaws.com/dotted.bucket/k");
}

TEST(S3ClientNoServer, RetriesSlowDownThenSucceeds) {
  std::string slow_down = http_response(503, "Slow Down", "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>");
  ScriptedHttpServer server({slow_down, slow_down, http_response(200, "OK", "hello")});
  S3Config config{{"AK", "SK", ""}, "us-east-1", "http://127.0.0.1:" + std::to_string(server.port())};
  auto client = S3Client::create(config, {.max_attempts = 5, .base_backoff = 10ms, .max_backoff = 20ms});
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->get_object("bucket", "key", 100);
  ASSERT_TRUE(got) << got.error();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, "hello");
  EXPECT_EQ((*client)->last_attempts(), 3);
  EXPECT_EQ(server.requests().size(), 3u);
}

// Every request names the program and release that sent it, which S3's
// access logs and CloudTrail record.
TEST(S3ClientNoServer, RequestsNameTheProgramInTheirUserAgent) {
  ScriptedHttpServer server({http_response(200, "OK", "hello")});
  S3Config config{{"AK", "SK", ""}, "us-east-1", "http://127.0.0.1:" + std::to_string(server.port())};
  auto client = S3Client::create(config);
  ASSERT_TRUE(client) << client.error();
  ASSERT_TRUE((*client)->get_object("bucket", "key", 100));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].headers.at("user-agent"),
            std::string("neuron-parallel-compile/" NPC_VERSION " (") + program_invocation_short_name + ")");
}

TEST(S3ClientNoServer, GivesUpAfterMaxAttemptsAndDoesNotRetryForbidden) {
  std::string slow_down = http_response(503, "Slow Down", "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>");
  std::string denied = http_response(403, "Forbidden", "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>");
  ScriptedHttpServer server({slow_down, slow_down, denied, http_response(200, "OK", "late")});
  S3Config config{{"AK", "SK", ""}, "us-east-1", "http://127.0.0.1:" + std::to_string(server.port())};
  auto client = S3Client::create(config, {.max_attempts = 2, .base_backoff = 10ms, .max_backoff = 20ms});
  ASSERT_TRUE(client) << client.error();
  auto got = (*client)->get_object("bucket", "key", 100);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), "S3 GetObject on s3://bucket/key at http://127.0.0.1:" + std::to_string(server.port()) +
                             " failed (503 SlowDown: Reduce your request rate.) (after 2 attempts)");
  EXPECT_EQ(server.requests().size(), 2u);
  auto denied_get = (*client)->get_object("bucket", "key", 100);
  ASSERT_FALSE(denied_get);
  EXPECT_EQ(denied_get.error(), "S3 denied GetObject on s3://bucket/key (403 AccessDenied): check the credentials' permissions");
  EXPECT_EQ((*client)->last_attempts(), 1);
  EXPECT_EQ(server.requests().size(), 3u);
  ASSERT_TRUE((*client)->get_object("bucket", "key", 100)); // lets the server thread finish
}

} // namespace
} // namespace npc::storage
