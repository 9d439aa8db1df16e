// The S3 backend under the failures of a real network: throttling, resets
// in the middle of a transfer, silent servers, a server that dies, one that
// was never there. Requests go to a real s3rver through a fault-injecting
// proxy (tests/support/fault_proxy.hpp), so every retry is counted exactly
// and every object is checked byte for byte after it.

#include <npc/storage/s3.hpp>
#include <npc/storage/s3_client.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include <npc/util/sha256.hpp>

#include "fault_proxy.hpp"
#include "files.hpp"
#include "fake_env.hpp"
#include "s3_server.hpp"
#include "silent_port.hpp"
#include "wait.hpp"

namespace npc::storage {
namespace {

using namespace std::chrono_literals;
using npc::test::FaultCounts;
using npc::test::FaultProxy;
using npc::test::kS3TestBucket;
using npc::test::ThrottleConnection;
namespace fs = std::filesystem;

// Only detects a hang; no test relies on how fast anything is.
constexpr auto kFaultHangLimit = 30s;

// Small limits so that every failure is over in a few seconds.
S3ClientOptions fast_options(int max_attempts) {
  S3ClientOptions options;
  options.connect_timeout = 500ms;
  options.low_speed_time = 1s; // a stalled response is given up after about 1 s
  options.max_attempts = max_attempts;
  options.max_retry_time = 20s;
  options.base_backoff = 5ms;
  options.max_backoff = 20ms;
  return options;
}

std::string random_bytes(std::size_t size, unsigned seed) {
  std::string data(size, '\0');
  std::mt19937 rng(seed);
  for (char& c : data) c = static_cast<char>(rng());
  return data;
}

FaultCounts operator-(const FaultCounts& a, const FaultCounts& b) {
  return {a.requests - b.requests, a.forwarded - b.forwarded, a.throttled - b.throttled,
          a.resets - b.resets,     a.stalled - b.stalled,     a.connections - b.connections};
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class S3Fault : public npc::test::S3ServerTest {
protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    if (HasFatalFailure()) return;
    proxy_ = std::make_unique<FaultProxy>(server_.port());
    open_storage(4);
  }
  void TearDown() override {
    storage_.reset();
    proxy_.reset();
    S3ServerTest::TearDown();
  }
  // A storage through the proxy; client_ is its client, for last_attempts().
  void open_storage(int max_attempts) {
    S3Config config = server_.config();
    config.endpoint = proxy_->endpoint();
    auto client = S3Client::create(config, fast_options(max_attempts));
    ASSERT_TRUE(client) << client.error();
    client_ = client->get();
    storage_ = std::make_unique<S3Storage>(std::move(*client), S3Location{kS3TestBucket, "cache"});
  }
  // The object's bytes read straight from s3rver, past the proxy.
  std::string object(const std::string& key) {
    auto direct = S3Client::create(server_.config());
    EXPECT_TRUE(direct) << direct.error();
    auto got = (*direct)->get_object(kS3TestBucket, key, 64 * 1024 * 1024);
    EXPECT_TRUE(got) << got.error();
    return got && *got ? **got : std::string("<absent>");
  }
  std::string reach_error(const std::string& reason, int attempts) const {
    return "cannot reach S3 endpoint " + proxy_->endpoint() + ": " + reason + " (after " + std::to_string(attempts) +
           " attempts)";
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<S3Storage> storage_;
  S3Client* client_ = nullptr;
};

TEST_F(S3Fault, ThrottledPutGetListHeadAreRetriedExactly) {
  for (ThrottleConnection connection : {ThrottleConnection::keep_alive, ThrottleConnection::close}) {
    SCOPED_TRACE(connection == ThrottleConnection::close ? "Connection: close" : "keep-alive");
    const std::string data = random_bytes(100 * 1024 + 7, 1);
    FaultCounts before = proxy_->counts();
    proxy_->throttle(2, connection);
    auto put = storage_->write("t/obj", data, storage::IfPresent::replace);
    ASSERT_TRUE(put) << put.error();
    EXPECT_EQ(client_->last_attempts(), 3);
    FaultCounts seen = proxy_->counts() - before;
    EXPECT_EQ(seen.requests, 3);
    EXPECT_EQ(seen.throttled, 2);
    EXPECT_EQ(seen.forwarded, 1);
    EXPECT_EQ(util::sha256_hex(object("cache/t/obj")), util::sha256_hex(data));

    before = proxy_->counts();
    proxy_->throttle(2, connection);
    auto read = storage_->read("t/obj", data.size());
    ASSERT_TRUE(read) << read.error();
    EXPECT_EQ(client_->last_attempts(), 3);
    EXPECT_EQ(read->size(), data.size());
    EXPECT_EQ(util::sha256_hex(*read), util::sha256_hex(data));
    EXPECT_EQ((proxy_->counts() - before).requests, 3);

    before = proxy_->counts();
    proxy_->throttle(3, connection);
    auto listed = storage_->list("t");
    ASSERT_TRUE(listed) << listed.error();
    EXPECT_EQ(*listed, std::vector<std::string>{"obj"});
    EXPECT_EQ(client_->last_attempts(), 4);
    EXPECT_EQ((proxy_->counts() - before).requests, 4);

    // HEAD: the proxy's 503 has no body, as HTTP wants of a HEAD answer.
    before = proxy_->counts();
    proxy_->throttle(1, connection);
    auto info = storage_->stat("t/obj");
    ASSERT_TRUE(info) << info.error();
    ASSERT_TRUE(info->has_value());
    EXPECT_EQ((*info)->size, data.size());
    EXPECT_EQ(client_->last_attempts(), 2);
    EXPECT_EQ((proxy_->counts() - before).requests, 2);
  }
}

// A file upload sends "Expect: 100-continue": the throttling answer comes
// before the body, and the connection is closed.
TEST_F(S3Fault, ThrottledFileUploadIsRetriedAndWhole) {
  const std::string data = random_bytes(3 * 1024 * 1024 + 11, 2);
  npc::test::write_text(dir() / "up.bin", data);
  FaultCounts before = proxy_->counts();
  proxy_->throttle(2);
  auto put = storage_->write("f/up.bin", storage::Body::file(dir() / "up.bin"), storage::IfPresent::replace);
  ASSERT_TRUE(put) << put.error();
  EXPECT_EQ(client_->last_attempts(), 3);
  FaultCounts seen = proxy_->counts() - before;
  EXPECT_EQ(seen.requests, 3);
  EXPECT_EQ(seen.throttled, 2);
  std::string stored = object("cache/f/up.bin");
  EXPECT_EQ(stored.size(), data.size());
  EXPECT_EQ(util::sha256_hex(stored), util::sha256_hex(data));
}

TEST_F(S3Fault, ResetMidDownloadIsRetriedAndTheFileIsWhole) {
  const std::string data = random_bytes(2 * 1024 * 1024 + 3, 3);
  ASSERT_TRUE(storage_->write("d/big", data, storage::IfPresent::replace));
  fs::create_directories(dir() / "down");
  FaultCounts before = proxy_->counts();
  proxy_->reset_responses(2, 64 * 1024);
  auto got = storage_->read("d/big", storage::Into::file(dir() / "down" / "big.bin"));
  ASSERT_TRUE(got) << got.error();
  EXPECT_TRUE(*got);
  EXPECT_EQ(client_->last_attempts(), 3);
  FaultCounts seen = proxy_->counts() - before;
  EXPECT_EQ(seen.requests, 3);
  EXPECT_EQ(seen.resets, 2);
  EXPECT_EQ(fs::file_size(dir() / "down" / "big.bin"), data.size());
  EXPECT_EQ(npc::test::file_sha256(dir() / "down" / "big.bin"), util::sha256_hex(data));
  EXPECT_EQ(names_in(dir() / "down"), std::vector<std::string>{"big.bin"}); // no temp file left

  // Reset every time: nothing at the destination, no temp file either.
  before = proxy_->counts();
  proxy_->reset_responses(100, 64 * 1024);
  auto failed = storage_->read("d/big", storage::Into::file(dir() / "down" / "again.bin"));
  proxy_->clear();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), reach_error("Recv failure: Connection reset by peer", 4));
  EXPECT_EQ((proxy_->counts() - before).requests, 4);
  EXPECT_EQ(names_in(dir() / "down"), std::vector<std::string>{"big.bin"});
}

TEST_F(S3Fault, ResetMidUploadIsRetriedAndTheObjectIsWhole) {
  const std::string data = random_bytes(2 * 1024 * 1024 + 5, 4);
  npc::test::write_text(dir() / "up.bin", data);
  FaultCounts before = proxy_->counts();
  proxy_->reset_requests(2, 100 * 1024);
  auto put = storage_->write("u/up.bin", storage::Body::file(dir() / "up.bin"), storage::IfPresent::replace);
  ASSERT_TRUE(put) << put.error();
  EXPECT_EQ(client_->last_attempts(), 3);
  FaultCounts seen = proxy_->counts() - before;
  EXPECT_EQ(seen.requests, 3);
  EXPECT_EQ(seen.resets, 2);
  std::string stored = object("cache/u/up.bin");
  EXPECT_EQ(stored.size(), data.size());
  EXPECT_EQ(util::sha256_hex(stored), util::sha256_hex(data));

  // From memory too (a body signed with its SHA-256).
  const std::string small = random_bytes(50 * 1000, 5);
  before = proxy_->counts();
  proxy_->reset_requests(1, 1000);
  auto written = storage_->write("u/small", small, storage::IfPresent::replace);
  ASSERT_TRUE(written) << written.error();
  EXPECT_EQ(client_->last_attempts(), 2);
  EXPECT_EQ((proxy_->counts() - before).requests, 2);
  EXPECT_EQ(util::sha256_hex(object("cache/u/small")), util::sha256_hex(small));
}

TEST_F(S3Fault, StalledResponseIsGivenUpAndRetried) {
  ASSERT_TRUE(storage_->write("s/obj", "stalled once", storage::IfPresent::replace));
  FaultCounts before = proxy_->counts();
  proxy_->stall_responses(1);
  auto read = storage_->read("s/obj", 100);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(*read, "stalled once");
  EXPECT_EQ(client_->last_attempts(), 2);
  FaultCounts seen = proxy_->counts() - before;
  EXPECT_EQ(seen.requests, 2);
  EXPECT_EQ(seen.stalled, 1);
}

TEST_F(S3Fault, MoreThrottlingThanAttemptsFailsInOneLine) {
  ASSERT_TRUE(storage_->write("m/obj", "x", storage::IfPresent::replace));
  FaultCounts before = proxy_->counts();
  proxy_->throttle(100);
  auto started = std::chrono::steady_clock::now();
  auto read = storage_->read("m/obj", 100);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kFaultHangLimit);
  proxy_->clear();
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "S3 GetObject on s3://test-bucket/cache/m/obj at " + proxy_->endpoint() +
                              " failed (503 SlowDown: Please reduce your request rate.) (after 4 attempts)");
  EXPECT_EQ(client_->last_attempts(), 4);
  EXPECT_EQ((proxy_->counts() - before).requests, 4);
  // The rules used up, the next call goes through at once.
  auto again = storage_->read("m/obj", 100);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(client_->last_attempts(), 1);
}

TEST_F(S3Fault, StalledEveryTimeFailsInOneLineNamingTheEndpoint) {
  open_storage(2);
  ASSERT_TRUE(storage_->write("s/obj", "x", storage::IfPresent::replace));
  proxy_->stall_responses(100);
  auto started = std::chrono::steady_clock::now();
  auto read = storage_->read("s/obj", 100);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kFaultHangLimit);
  proxy_->clear();
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), reach_error("Operation too slow. Less than 1024 bytes/sec transferred the last 1 seconds", 2));
  EXPECT_EQ(client_->last_attempts(), 2);
}

// A server that takes each request and never answers: every small request
// (GET, LIST, HEAD, DELETE, PUT from memory) gives each attempt up after
// request_timeout, far before the stall limit (30 s here, as by default),
// retries it, and fails in one line naming the endpoint.
TEST_F(S3Fault, AHungServerCostsEachSmallRequestItsTimeoutPerAttempt) {
  ASSERT_TRUE(storage_->write("h/obj", "x", storage::IfPresent::replace));
  S3Config config = server_.config();
  config.endpoint = proxy_->endpoint();
  S3ClientOptions options = fast_options(3);
  options.low_speed_time = 30s; // only the request timeout can end an attempt
  options.request_timeout = 400ms;
  auto made = S3Client::create(config, options);
  ASSERT_TRUE(made) << made.error();
  S3Client* client = made->get();
  S3Storage storage(std::move(*made), S3Location{kS3TestBucket, "cache"});

  const std::string prefix = "cannot reach S3 endpoint " + proxy_->endpoint() + ": Operation timed out after ";
  const std::string suffix = " (after 3 attempts)";
  auto check = [&](const char* what, const std::function<std::optional<std::string>()>& call) {
    SCOPED_TRACE(what);
    FaultCounts before = proxy_->counts();
    proxy_->stall_responses(100);
    auto started = std::chrono::steady_clock::now();
    std::optional<std::string> error = call();
    auto took = std::chrono::steady_clock::now() - started;
    proxy_->clear();
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->rfind(prefix, 0), 0u) << *error;
    ASSERT_GE(error->size(), suffix.size());
    EXPECT_EQ(error->substr(error->size() - suffix.size()), suffix) << *error;
    EXPECT_EQ(error->find('\n'), std::string::npos);
    EXPECT_EQ(client->last_attempts(), 3);
    FaultCounts seen = proxy_->counts() - before;
    EXPECT_EQ(seen.requests, 3);
    EXPECT_EQ(seen.stalled, 3);
    // Each attempt waited its whole bound, and not much more: three times
    // 400 ms and the backoffs (at most 20 ms each), with room for a loaded
    // machine, far below one stall limit.
    EXPECT_GE(took, 3 * 400ms - 30ms);
    EXPECT_LT(took, 10s);
  };
  check("GET", [&]() -> std::optional<std::string> {
    auto r = storage.read("h/obj", 100);
    return r ? std::nullopt : std::optional<std::string>(r.error());
  });
  check("LIST", [&]() -> std::optional<std::string> {
    auto r = storage.list("h");
    return r ? std::nullopt : std::optional<std::string>(r.error());
  });
  check("HEAD", [&]() -> std::optional<std::string> {
    auto r = storage.stat("h/obj");
    return r ? std::nullopt : std::optional<std::string>(r.error());
  });
  check("PUT", [&]() -> std::optional<std::string> {
    auto r = storage.write("h/obj", "y", storage::IfPresent::replace);
    return r ? std::nullopt : std::optional<std::string>(r.error());
  });
  check("DELETE", [&]() -> std::optional<std::string> {
    auto r = storage.remove("h/obj");
    return r ? std::nullopt : std::optional<std::string>(r.error());
  });
  // The server answers again: the next requests go through at once (the
  // stalled requests did reach s3rver, the DELETE last: no h/obj now).
  ASSERT_TRUE(storage.write("h/again", "z", storage::IfPresent::replace));
  EXPECT_EQ(client->last_attempts(), 1);
  auto read = storage.read("h/again", 100);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(*read, "z");
  EXPECT_EQ(client->last_attempts(), 1);
}

// The retry budget bounds the attempt too: a request timeout longer than
// what is left of max_retry_time is cut to it, so a hung server costs the
// budget, not the budget and one more request timeout.
TEST_F(S3Fault, AHungRequestEndsWithinTheRetryBudget) {
  S3Config config = server_.config();
  config.endpoint = proxy_->endpoint();
  S3ClientOptions options = fast_options(5);
  options.low_speed_time = 30s;
  options.request_timeout = 20s;
  options.max_retry_time = 1s;
  auto client = S3Client::create(config, options);
  ASSERT_TRUE(client) << client.error();
  proxy_->stall_responses(100);
  auto started = std::chrono::steady_clock::now();
  auto head = (*client)->head_object(kS3TestBucket, "cache/k");
  auto took = std::chrono::steady_clock::now() - started;
  proxy_->clear();
  ASSERT_FALSE(head);
  EXPECT_EQ(head.error().rfind("cannot reach S3 endpoint " + proxy_->endpoint() + ": Operation timed out after ", 0), 0u)
      << head.error();
  EXPECT_EQ((*client)->last_attempts(), 1); // no time left for a second
  EXPECT_GE(took, 1s - 30ms);
  EXPECT_LT(took, 5s); // far below the 20 s request timeout
}

// A file streamed either way is bounded by the stall limit only: with a
// request timeout of 1 ms, which no request through the proxy meets, a
// 3 MB upload and its download still go through, first time.
TEST_F(S3Fault, FileTransfersAreNotBoundedByTheRequestTimeout) {
  S3Config config = server_.config();
  config.endpoint = proxy_->endpoint();
  S3ClientOptions options = fast_options(1);
  options.request_timeout = 1ms;
  auto made = S3Client::create(config, options);
  ASSERT_TRUE(made) << made.error();
  S3Client* client = made->get();
  S3Storage storage(std::move(*made), S3Location{kS3TestBucket, "cache"});
  const std::string data = random_bytes(3 * 1024 * 1024 + 13, 6);
  npc::test::write_text(dir() / "up.bin", data);
  auto put = storage.write("big/up.bin", storage::Body::file(dir() / "up.bin"), storage::IfPresent::replace);
  ASSERT_TRUE(put) << put.error();
  EXPECT_EQ(client->last_attempts(), 1);
  EXPECT_EQ(util::sha256_hex(object("cache/big/up.bin")), util::sha256_hex(data));
  auto got = storage.read("big/up.bin", storage::Into::file(dir() / "down.bin"));
  ASSERT_TRUE(got) << got.error();
  EXPECT_TRUE(*got);
  EXPECT_EQ(client->last_attempts(), 1);
  EXPECT_EQ(npc::test::file_sha256(dir() / "down.bin"), util::sha256_hex(data));
}

// The server goes away while a worker runs operations: the operation in
// flight and every later one fail in one line that names the endpoint.
// A server killed while requests run: an s3rver of the test's own, since the
// run's gateway is shared.
class S3FaultOwnServer : public S3Fault {
protected:
  [[nodiscard]] npc::test::S3Backend backend() const override { return npc::test::S3Backend::s3rver; }
};

TEST_F(S3FaultOwnServer, ServerKilledMidRun) {
  S3Config config = server_.config();
  auto client = S3Client::create(config, fast_options(3));
  ASSERT_TRUE(client) << client.error();
  S3Client* direct = client->get();
  S3Storage storage(std::move(*client), S3Location{kS3TestBucket, "run"});

  std::atomic<int> done{0};
  std::string first_failure; // written by the worker, read after join
  std::thread worker([&] {
    auto deadline = std::chrono::steady_clock::now() + kFaultHangLimit;
    for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
      std::string key = "k/" + std::to_string(i % 10);
      auto put = storage.write(key, key, storage::IfPresent::replace);
      if (!put) {
        first_failure = put.error();
        return;
      }
      auto read = storage.read(key, 100);
      if (!read) {
        first_failure = read.error();
        return;
      }
      done.fetch_add(1);
    }
  });
  ASSERT_TRUE(npc::test::wait_until([&] { return done.load() >= 5; }, kFaultHangLimit));
  server_.stop();
  worker.join();

  const std::string prefix = "cannot reach S3 endpoint " + config.endpoint + ": ";
  EXPECT_EQ(first_failure.rfind(prefix, 0), 0u) << first_failure;
  EXPECT_EQ(first_failure.find('\n'), std::string::npos) << first_failure;
  auto after = storage.read("k/0", 100);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error(), prefix + "Connection refused (after 3 attempts)");
  EXPECT_EQ(direct->last_attempts(), 3);
}

// The probe's create-only check cut off (its first PUT reset, not retried):
// the storage stays usable and keeps the cautious answer, so a create-only
// write still looks first (HEAD, then PUT), as on a server that ignores the
// condition; the probe object is removed. A later probe learns again.
TEST_F(S3Fault, AProbeWhoseCreateOnlyCheckIsCutOffKeepsTheCautiousAnswer) {
  open_storage(1);
  FaultCounts before = proxy_->counts();
  proxy_->reset_requests(2, 3); // the LIST (no body) uses up the first; the first PUT is reset
  auto probe = storage_->probe();
  EXPECT_EQ(probe.reach, Reach::usable) << probe.detail;
  EXPECT_FALSE(storage_->exclusive_create_is_exact());
  FaultCounts seen = proxy_->counts() - before;
  EXPECT_EQ(seen.requests, 3) << "LIST, the PUT cut off, the DELETE of the probe object";
  EXPECT_EQ(seen.resets, 1);
  auto left = storage_->list(".npc/create-probe");
  ASSERT_TRUE(left) << left.error();
  EXPECT_TRUE(left->empty()) << left->front();

  before = proxy_->counts();
  auto created = storage_->write("t/lock", "mine", storage::IfPresent::keep);
  ASSERT_TRUE(created) << created.error();
  EXPECT_TRUE(*created);
  EXPECT_EQ((proxy_->counts() - before).requests, 2) << "a HEAD before the create-only PUT";

  probe = storage_->probe();
  EXPECT_EQ(probe.reach, Reach::usable) << probe.detail;
  EXPECT_TRUE(storage_->exclusive_create_is_exact()) << "the RADOS Gateway honours If-None-Match";
}

// A launcher killed between the probe's PUTs and its DELETE leaves the probe
// object: nothing reads it, and the next probe, under a name of its own,
// learns as usual.
TEST_F(S3Fault, AProbeObjectLeftByAKilledLauncherChangesNothing) {
  ASSERT_TRUE(storage_->write(".npc/create-probe/left-by-a-killed-launcher", "probe\n", storage::IfPresent::replace));
  FaultCounts before = proxy_->counts();
  auto probe = storage_->probe();
  EXPECT_EQ(probe.reach, Reach::usable) << probe.detail;
  EXPECT_TRUE(storage_->exclusive_create_is_exact());
  EXPECT_EQ((proxy_->counts() - before).requests, 4) << "LIST, 2 create-only PUTs, DELETE";
  auto left = storage_->list(".npc/create-probe");
  ASSERT_TRUE(left) << left.error();
  EXPECT_EQ(*left, std::vector<std::string>{"left-by-a-killed-launcher"});
}

TEST_F(S3Fault, ClosedPortFailsInOneLine) {
  int port = npc::test::free_loopback_port();
  ASSERT_NE(port, 0);
  std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  std::map<std::string, std::string> vars{{"AWS_ACCESS_KEY_ID", "AK"},
                                          {"AWS_SECRET_ACCESS_KEY", "SK"},
                                          {"AWS_ENDPOINT_URL_S3", endpoint},
                                          {"AWS_EC2_METADATA_DISABLED", "true"}};
  EnvLookup env = npc::test::env_lookup(vars);
  auto storage = S3Storage::open("s3://test-bucket/x", env, fast_options(3));
  ASSERT_TRUE(storage) << storage.error();
  auto started = std::chrono::steady_clock::now();
  auto listed = (*storage)->list("");
  EXPECT_LT(std::chrono::steady_clock::now() - started, kFaultHangLimit);
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error(), "cannot reach S3 endpoint " + endpoint + ": Connection refused (after 3 attempts)");
}

// A server that never completes the connect (as an address nobody routes):
// the connect timeout ends each attempt, and one line names the endpoint.
TEST_F(S3Fault, AnEndpointThatNeverAnswersTheConnectFailsInOneLineWithinTheConnectTimeout) {
  test::SilentPort silent;
  ASSERT_FALSE(HasFatalFailure());
  S3Config config = server_.config();
  config.endpoint = silent.endpoint();
  S3ClientOptions options = fast_options(2);
  options.connect_timeout = 300ms;
  auto client = S3Client::create(config, options);
  ASSERT_TRUE(client) << client.error();
  auto started = std::chrono::steady_clock::now();
  auto head = (*client)->head_object(kS3TestBucket, "k");
  EXPECT_LT(std::chrono::steady_clock::now() - started, kFaultHangLimit);
  ASSERT_FALSE(head);
  const std::string prefix = "cannot reach S3 endpoint " + silent.endpoint() + ": ";
  const std::string suffix = " (after 2 attempts)";
  EXPECT_EQ(head.error().rfind(prefix, 0), 0u) << head.error();
  // curl says "Connection timeout after 300 ms" or "Failed to connect to
  // ... after 301 ms: Timeout was reached", depending on which timer fired.
  EXPECT_NE(head.error().find("imeout"), std::string::npos) << head.error();
  ASSERT_GE(head.error().size(), suffix.size());
  EXPECT_EQ(head.error().substr(head.error().size() - suffix.size()), suffix) << head.error();
  EXPECT_EQ(head.error().find('\n'), std::string::npos);
  EXPECT_EQ((*client)->last_attempts(), 2);
}

} // namespace
} // namespace npc::storage
