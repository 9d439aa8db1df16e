// The read-only secondary cache tier: a hit there is copied into the local
// cache (verified) and served; nothing there is ever written or touched.

#include <unistd.h>

#include "bundle_fixture.hpp"

namespace npc::test {
namespace {

using nlohmann::json;

const std::vector<std::string> kSecondaryTrain = {"--nproc_per_node", "2", "--steps_this_run", "4"};

class SecondaryCache : public BundleTest {
protected:
  fs::path shared() const { return base("shared"); }
  std::map<std::string, std::string> with_secondary() const {
    return {{"NEURON_COMPILE_CACHE_SECONDARY", shared().string()}};
  }
  // Fills the shared cache; keeps the graphs under dir()/work.
  std::vector<std::string> fill_shared() {
    auto r = train_in(shared(), {"--nproc_per_node", "2", "--steps_this_run", "4", "--workdir", (dir() / "work").string()});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    auto keys = done_keys(root_of(shared()));
    EXPECT_FALSE(keys.empty());
    return keys;
  }
  RunResult wrapper_compile(const fs::path& graph, const fs::path& output) const {
    return run_tool("neuron_cc_wrapper", {"compile", "--graph", graph.string(), "--output", output.string()},
                    with_secondary());
  }
  void expect_verifies() const {
    auto r = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
};

// How the secondary is made read-only for the run: a read-only bind mount in
// a private mount namespace when we are root (chmod does not stop root), or
// chmod -R a-w otherwise.
bool read_only_mount_works(const fs::path& scratch) {
  if (::geteuid() != 0) return false;
  fs::create_directories(scratch);
  auto probe = run({"unshare", "-m", "/bin/sh", "-c",
                    "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" \"$0\" && ! touch \"$0/x\" 2>/dev/null",
                    scratch.string()});
  return probe.exit_code == 0 && !fs::exists(scratch / "x");
}

TEST_F(SecondaryCache, HitIsCopiedVerifiedAndServedAndTheSecondaryIsUntouched) {
  auto keys = fill_shared();
  std::size_t compiled = compiles();
  auto before = tree_state(root_of(shared()));

  std::vector<std::string> argv = {(standin_dir() / "standin_train").string()};
  argv.insert(argv.end(), kSecondaryTrain.begin(), kSecondaryTrain.end());
  bool mount = read_only_mount_works(dir() / "probe");
  RecordProperty("read_only_by", mount ? "read-only bind mount" : "chmod -R a-w");
  if (mount) {
    argv.insert(argv.begin(), {"unshare", "-m", "/bin/sh", "-c",
                               "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" \"$0\" && exec \"$@\"",
                               root_of(shared()).string()});
  } else {
    ASSERT_EQ(run({"chmod", "-R", "a-w", root_of(shared()).string()}).exit_code, 0);
    before = tree_state(root_of(shared()));
  }
  auto env = env_;
  for (auto& [k, v] : with_secondary()) env[k] = v;
  RunOptions o = options(env);
  auto trained = run(argv, o);
  auto after = tree_state(root_of(shared()));
  if (!mount) std::ignore = run({"chmod", "-R", "u+w", root_of(shared()).string()});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_EQ(summary_field(trained.out, "jit_compiles"), 0) << trained.out;
  EXPECT_EQ(compiles(), compiled) << "served from the secondary, not compiled";
  EXPECT_NE(trained.out.find("from the secondary cache"), std::string::npos) << trained.out;

  std::vector<std::string> local;
  for (const auto& e : entries()) local.push_back(e.parent_path().filename().string() + "/" + e.filename().string());
  EXPECT_EQ(local, keys);
  for (const auto& k : keys)
    EXPECT_EQ(read_text(cache_root() / k / "model.neff"), read_text(root_of(shared()) / k / "model.neff")) << k;
  expect_verifies();
  EXPECT_EQ(after, before) << "the secondary cache was modified";

  // Now local: served without the secondary.
  auto again = train_in(dir() / "c", kSecondaryTrain);
  EXPECT_EQ(summary_field(again.out, "jit_compiles"), 0) << again.out;
  EXPECT_EQ(compiles(), compiled);
}

TEST_F(SecondaryCache, CorruptNeffThereIsNotServed) {
  auto keys = fill_shared();
  auto graphs = graphs_in(dir() / "work");
  ASSERT_EQ(graphs.size(), keys.size());
  std::size_t compiled = compiles();
  // Which entry holds which graph: the wrapper's own key command says.
  fs::path victim_graph = graphs.front();
  auto key_out = run_tool("neuron_cc_wrapper", {"key", "--graph", victim_graph.string()});
  ASSERT_EQ(key_out.exit_code, 0) << key_out.describe();
  fs::path local_entry = key_out.out.substr(0, key_out.out.find('\n'));
  fs::path shared_entry = root_of(shared()) / local_entry.parent_path().filename() / local_entry.filename();
  ASSERT_TRUE(fs::exists(shared_entry / "model.neff")) << shared_entry;
  std::string neff = read_text(shared_entry / "model.neff");
  neff[neff.size() - 10] ^= 0x01;
  write_text(shared_entry / "model.neff", neff);
  auto before = tree_state(root_of(shared()));

  auto r = wrapper_compile(victim_graph, dir() / "out.neff");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("does not match its integrity record"), std::string::npos) << r.describe();
  EXPECT_EQ(compiles(), compiled + 1) << "compiled here instead";
  EXPECT_NE(read_text(dir() / "out.neff").find("graph-sha256: " + sha256_of(read_text(victim_graph))),
            std::string::npos);
  EXPECT_NE(read_text(local_entry / "model.neff"), neff);
  EXPECT_EQ(tree_state(root_of(shared())), before);

  // The others are still served from there.
  auto other = wrapper_compile(graphs.back(), dir() / "out2.neff");
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_NE(other.out.find("Using a cached neff"), std::string::npos) << other.describe();
  EXPECT_EQ(compiles(), compiled + 1);
  expect_verifies();
}

TEST_F(SecondaryCache, EntryWithoutIntegrityRecordIsHashedAndRecorded) {
  fill_shared();
  auto graphs = graphs_in(dir() / "work");
  std::size_t compiled = compiles();
  auto key_out = run_tool("neuron_cc_wrapper", {"key", "--graph", graphs.front().string()});
  fs::path local_entry = key_out.out.substr(0, key_out.out.find('\n'));
  fs::path shared_entry = root_of(shared()) / local_entry.parent_path().filename() / local_entry.filename();
  fs::remove(shared_entry / "npc-entry.json"); // as another tool leaves an entry

  // Named by the option this time, as DIR (holding neuron-compile-cache/).
  auto r = run_tool("neuron_cc_wrapper", {"compile", "--graph", graphs.front().string(), "--output",
                                          (dir() / "out.neff").string(), "--secondary-cache", shared().string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), compiled);
  json meta = json::parse(read_text(local_entry / "npc-entry.json"));
  EXPECT_EQ(meta["neff"]["sha256"], sha256_of(read_text(shared_entry / "model.neff")));
  EXPECT_FALSE(fs::exists(shared_entry / "npc-entry.json"));
  expect_verifies();
}

} // namespace
} // namespace npc::test
