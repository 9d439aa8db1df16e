// neuron_cache and the launcher's maintenance modes on an S3 cache (the run's
// RADOS Gateway on loopback): each works on S3's objects, the cache every node
// shares, not on this node's mirror; clean and clear-neffs also clear the
// mirror, whose results the next launcher run would upload again.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/storage/lock.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

using nlohmann::json;

class S3Maintenance : public S3CacheTest {
protected:
  void SetUp() override {
    S3CacheTest::SetUp();
    if (HasFatalFailure()) return;
    client_ = client();
    ASSERT_TRUE(client_);
  }
  // Compiles `text` through the wrapper: a done entry in S3. Its key.
  std::string compiled(const std::string& name, const std::string& text) {
    auto run = compile(graph(name, text), dir() / (name + ".neff"));
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    return newest_entry();
  }
  // The entry key (neuronxcc-V/MODULE_...) whose model.done was written last.
  std::string newest_entry() {
    auto all = client_->list_all(kS3TestBucket, {.prefix = version_dir() + "/"});
    EXPECT_TRUE(all.ok());
    std::string key;
    storage::Time newest{};
    for (const auto& o : all->objects)
      if (o.key.ends_with("/model.done") && o.modified >= newest) {
        newest = o.modified;
        key = o.key.substr(std::string("team/").size(), o.key.size() - std::string("team/").size() - 11);
      }
    return key;
  }
  void put(const std::string& key, const std::string& body) {
    ASSERT_TRUE(client_->put_object(kS3TestBucket, "team/" + key, body).ok());
  }
  bool exists(const std::string& key) {
    auto head = client_->head_object(kS3TestBucket, "team/" + key);
    EXPECT_TRUE(head.ok());
    return head.ok() && head->has_value();
  }
  // A pending entry put straight into S3 (as extraction leaves one).
  std::string put_pending(const std::string& module) {
    std::string key = version_dir().substr(std::string("team/").size()) + "/" + module;
    put(key + "/model.hlo_module.pb", "HloModule " + module + "\n");
    put(key + "/compile_flags.json", "[]\n");
    return key;
  }
  json tool_json(const std::vector<std::string>& args, int expected_exit = 0) {
    std::vector<std::string> all = {"--json"};
    all.insert(all.end(), args.begin(), args.end());
    auto run = run_tool("neuron_cache", all);
    EXPECT_EQ(run.exit_code, expected_exit) << run.describe();
    return json::parse(run.out, nullptr, false);
  }

  std::unique_ptr<storage::S3Client> client_;
};

const std::string kModuleA = "MODULE_1111111111111111+2222222222222222";
const std::string kModuleB = "MODULE_3333333333333333+4444444444444444";

TEST_F(S3Maintenance, LsAndStatsCountS3sEntriesNotTheMirrors) {
  std::string a = compiled("a.hlo", "HloModule a\n");
  std::string b = compiled("b.hlo", "HloModule b\n");
  put_pending(kModuleA);
  // This node's mirror has both results; another node's has nothing.
  auto ls = tool_json({"ls"});
  EXPECT_EQ(ls["cache_root"], kUrl);
  ASSERT_EQ(ls["entries"].size(), 3u) << ls.dump();
  std::map<std::string, std::string> states;
  for (const auto& e : ls["entries"]) states[e["key"]] = e["state"];
  EXPECT_EQ(states[a], "done");
  EXPECT_EQ(states[b], "done");
  EXPECT_EQ(states[version_dir().substr(5) + "/" + kModuleA], "pending");
  EXPECT_EQ(ls["entries"][0]["path"], std::string(kUrl) + "/" + ls["entries"][0]["key"].get<std::string>());

  auto stats = run_tool("neuron_cache", {"--json", "stats"}, {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  ASSERT_EQ(stats.exit_code, 0) << stats.describe();
  auto doc = json::parse(stats.out);
  EXPECT_EQ(doc["entries"], 3);
  EXPECT_EQ(doc["states"]["done"], 2);
  EXPECT_EQ(doc["states"]["pending"], 1);
  EXPECT_FALSE(fs::exists(dir() / "node-b" / "s3" / "test-bucket" / "team")) << "stats wrote into the mirror";
}

TEST_F(S3Maintenance, RmClearFailedAndClearLocksChangeS3) {
  std::string done = compiled("a.hlo", "HloModule a\n");
  std::string failed = put_pending(kModuleA);
  put(failed + "/model.log", "error: no\n");
  std::string stale = put_pending(kModuleB);
  storage::LockRecord record{"pid 1 on another-host", "token", 1000};
  put(stale + "/model.hlo_module.pb.lock", record.serialize());

  auto cleared = run_tool("neuron_cache", {"clear-failed"});
  EXPECT_EQ(cleared.exit_code, 0) << cleared.describe();
  EXPECT_EQ(cleared.out, "cleared " + failed + "\n1 cached failures cleared\n");
  EXPECT_FALSE(exists(failed + "/model.log"));
  EXPECT_TRUE(exists(failed + "/model.hlo_module.pb"));

  auto locks = run_tool("neuron_cache", {"clear-locks"});
  EXPECT_EQ(locks.exit_code, 0) << locks.describe();
  EXPECT_EQ(locks.out, "removed s3://test-bucket/team/" + stale + "/model.hlo_module.pb.lock\n1 lock files removed\n");
  EXPECT_FALSE(exists(stale + "/model.hlo_module.pb.lock"));

  auto rm = run_tool("neuron_cache", {"rm", done});
  EXPECT_EQ(rm.exit_code, 0) << rm.describe();
  EXPECT_EQ(rm.out, "removed " + done + "\n");
  EXPECT_FALSE(exists(done + "/model.done"));
  EXPECT_FALSE(exists(done + "/model.neff"));
  auto again = run_tool("neuron_cache", {"rm", done});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("no cache entry " + done + " in " + kUrl), std::string::npos) << again.err;
}

TEST_F(S3Maintenance, VerifyFindsATamperedNeffAndRepairDemotesIt) {
  std::string good = compiled("a.hlo", "HloModule a\n");
  std::string bad = compiled("b.hlo", "HloModule b\n");
  put(bad + "/model.neff", "not the NEFF that was compiled");
  auto verify = run_tool("neuron_cache", {"verify"});
  EXPECT_EQ(verify.exit_code, 1) << verify.describe();
  EXPECT_EQ(verify.out, "BAD " + bad +
                            ": NEFF does not match its integrity record\n2 done entries checked, 1 bad, 0 without an "
                            "integrity record\n");
  auto repair = run_tool("neuron_cache", {"verify", "--repair"});
  EXPECT_EQ(repair.exit_code, 0) << repair.describe();
  EXPECT_FALSE(exists(bad + "/model.done"));
  EXPECT_FALSE(exists(bad + "/model.neff"));
  EXPECT_FALSE(exists(bad + "/model.hlo_module.pb.lock"));
  EXPECT_TRUE(exists(good + "/model.done"));
  EXPECT_EQ(run_tool("neuron_cache", {"verify"}).exit_code, 0);
}

TEST_F(S3Maintenance, PruneDeletesDoneEntriesPastTheTtlAndKeepsPending) {
  compiled("a.hlo", "HloModule a\n");
  compiled("b.hlo", "HloModule b\n");
  std::string pending = put_pending(kModuleA);
  auto kept = tool_json({"prune", "--max-size", "1"});
  EXPECT_EQ(kept["deleted"].size(), 0u) << kept.dump();
  EXPECT_EQ(kept["kept_by_ttl"], 2) << "used just now: the TTL keeps them";
  auto dry = tool_json({"prune", "--max-size", "1", "--ttl", "0", "--dry-run"});
  EXPECT_EQ(dry["deleted"].size(), 2u);
  EXPECT_EQ(objects().size(), 2 * done_entry().size() + 2);
  auto pruned = tool_json({"prune", "--max-size", "1", "--ttl", "0"});
  ASSERT_EQ(pruned["deleted"].size(), 2u) << pruned.dump();
  EXPECT_EQ(pruned["kept_pending"], 1);
  EXPECT_EQ(objects(), (std::vector<std::string>{version_dir() + "/E/compile_flags.json",
                                                 version_dir() + "/E/model.hlo_module.pb"}));
}

TEST_F(S3Maintenance, TheLaunchersModesWorkOnS3AndTheMirror) {
  compiled("a.hlo", "HloModule a\n");
  std::string b = compiled("b.hlo", "HloModule b\n");
  std::string stale = put_pending(kModuleB);
  put(stale + "/model.hlo_module.pb.lock", storage::LockRecord{"pid 1 on another-host", "t", 1000}.serialize());

  auto locks = run_tool("neuron_parallel_compile", {"--command", "clear-locks"});
  EXPECT_EQ(locks.exit_code, 0) << locks.describe();
  EXPECT_EQ(locks.out, std::string("1 stale lock files removed (") + kUrl + ")\n");

  auto neffs = run_tool("neuron_parallel_compile", {"--command", "clear-neffs"});
  EXPECT_EQ(neffs.exit_code, 0) << neffs.describe();
  EXPECT_EQ(neffs.out, std::string("cleared the results of 2 entries of neuronxcc-") + kStandinVersion +
                           "; their graphs stay pending (" + kUrl + ")\n" +
                           "cleared the results of 2 entries of neuronxcc-" + kStandinVersion +
                           "; their graphs stay pending (" + (dir() / "node-a" / "s3" / "test-bucket" / "team").string() +
                           ")\n");
  EXPECT_FALSE(exists(b + "/model.done"));
  EXPECT_TRUE(exists(b + "/model.hlo_module.pb"));
  EXPECT_FALSE(fs::exists(mirror_version_dir() / fs::path(b).filename() / "model.done"));

  auto clean = run_tool("neuron_parallel_compile", {"--command", "clean"});
  EXPECT_EQ(clean.exit_code, 0) << clean.describe();
  EXPECT_EQ(clean.out, std::string("removed 3 entries of neuronxcc-") + kStandinVersion + " (" + kUrl + ")\n" +
                           "removed 2 entries of neuronxcc-" + kStandinVersion + " (" +
                           (dir() / "node-a" / "s3" / "test-bucket" / "team").string() + ")\n");
  EXPECT_TRUE(objects().empty());
  EXPECT_TRUE(test::names_in(mirror_version_dir()).empty());
}

} // namespace
} // namespace npc::test
