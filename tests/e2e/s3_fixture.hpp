#pragma once
// The end-to-end tests' S3 cache: a real S3 server on loopback (the run's
// RADOS Gateway, in a tenant of the test's own: s3_server.hpp), the programs
// pointed at it by the AWS environment (and nothing of this machine's AWS
// set-up), node A's mirror in <test dir>/node-a.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <npc/storage/s3_client.hpp>

#include "refused_port.hpp"
#include "s3_server.hpp"
#include "test_support.hpp"

namespace npc::test {

inline constexpr const char* kUrl = "s3://test-bucket/team";

class S3CacheTest : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(server_.start(dir() / "s3", backend()));
    env_["NEURON_CC_FLAGS"] = std::string("--cache_dir=") + kUrl;
    env_["NEURON_COMPILE_CACHE_MIRROR"] = (dir() / "node-a").string();
    env_["AWS_ACCESS_KEY_ID"] = server_.access_key();
    env_["AWS_SECRET_ACCESS_KEY"] = server_.secret_key();
    env_["AWS_REGION"] = "us-east-1";
    env_["AWS_ENDPOINT_URL_S3"] = server_.endpoint();
    // Nothing from this machine's AWS set-up or instance metadata.
    env_["AWS_CONFIG_FILE"] = (dir() / "no-aws-config").string();
    env_["AWS_SHARED_CREDENTIALS_FILE"] = (dir() / "no-aws-credentials").string();
    env_["AWS_EC2_METADATA_DISABLED"] = "true";
  }
  [[nodiscard]] virtual S3Backend backend() const { return S3Backend::rgw; }

  // Takes S3 away from the programs the test runs next, as an outage would:
  // their endpoint becomes a loopback port that refuses connections (the
  // run's gateway itself stays, for the other tests).
  void take_s3_away() {
    refused_ = std::make_unique<RefusedPort>();
    env_["AWS_ENDPOINT_URL_S3"] = refused_->endpoint();
  }
  // The endpoint the programs are given.
  [[nodiscard]] std::string s3_endpoint() const { return env_.at("AWS_ENDPOINT_URL_S3"); }

  void TearDown() override {
    server_.shut_down();
    CacheTest::TearDown();
  }

  fs::path graph(const std::string& name, const std::string& text) {
    fs::path p = dir() / "graphs" / name;
    write_text(p, text);
    return p;
  }
  RunResult compile(const fs::path& g, const fs::path& out, std::map<std::string, std::string> env = {}) {
    return run_tool("neuron_cc_wrapper", {"compile", "--graph", g.string(), "--output", out.string()}, std::move(env));
  }
  // A client of the test's server, as a node other than the programs under
  // test (to look at objects, or to put them as another node would).
  std::unique_ptr<storage::S3Client> client() {
    auto c = storage::S3Client::create(server_.config());
    if (!c) {
      ADD_FAILURE() << c.error();
      return nullptr;
    }
    return std::move(*c);
  }
  // Every object of the bucket, sorted, with the entry's folder shortened to
  // E; without the npc-last-use markers where a test cannot know which
  // entries a node fetched (two nodes racing); without the records of the
  // launchers' runs (.npc/precompiles/, precompile_records() counts them).
  std::vector<std::string> objects(bool with_uses = true) {
    auto c = client();
    if (!c) return {};
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) {
      ADD_FAILURE() << all.error();
      return {};
    }
    std::vector<std::string> keys;
    for (const auto& o : all->objects) {
      std::string key = o.key;
      auto module = key.find("/MODULE_");
      if (module != std::string::npos) key = key.substr(0, module) + "/E" + key.substr(key.find('/', module + 1));
      if (!with_uses && key.ends_with("/npc-last-use")) continue;
      if (key.find("/.npc/precompiles/") != std::string::npos) continue;
      keys.push_back(key);
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  // How many records of launcher runs the bucket holds (cache/precompile_record.hpp).
  std::size_t precompile_records() {
    auto c = client();
    if (!c) return 0;
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) {
      ADD_FAILURE() << all.error();
      return 0;
    }
    std::size_t n = 0;
    for (const auto& o : all->objects) n += o.key.find("/.npc/precompiles/") != std::string::npos;
    return n;
  }
  std::string object(const std::string& suffix) {
    auto c = client();
    if (!c) return "<no client>";
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) return "<cannot list: " + all.error() + ">";
    for (const auto& o : all->objects)
      if (o.key.ends_with(suffix)) return *(*c->get_object(kS3TestBucket, o.key, 1 << 24));
    return "<absent>";
  }
  static std::string version_dir() { return std::string("team/neuronxcc-") + kStandinVersion; }
  // Node `node`'s mirror of the cache: its compiler version folder.
  fs::path mirror_version_dir(const std::string& node = "node-a") const {
    return dir() / node / "s3" / "test-bucket" / "team" / (std::string("neuronxcc-") + kStandinVersion);
  }
  // The objects of a done entry; `used` adds the npc-last-use marker that a
  // node fetching the result writes.
  std::vector<std::string> done_entry(bool used = false) const {
    std::vector<std::string> keys;
    for (const char* f : {"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff", "npc-entry.json"})
      keys.push_back(version_dir() + "/E/" + f);
    if (used) keys.push_back(version_dir() + "/E/npc-last-use");
    return keys;
  }
  // The objects of `n` done entries (objects() shortens every entry to E).
  std::vector<std::string> done_entries(std::size_t n) const {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) {
      auto one = done_entry();
      keys.insert(keys.end(), one.begin(), one.end());
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  S3Server server_;
  std::unique_ptr<RefusedPort> refused_;
};

} // namespace npc::test
