// neuron_cache export, import and explain on an S3 cache (the run's RADOS Gateway on
// loopback): export takes S3's entries, whichever node compiled them, and
// records no use; import uploads a bundle's entries to S3 under their
// remote locks, keeping a result S3 has already; explain downloads only the
// graphs of the size it looks for.
//
// The keys below (as in explain_test.cpp), computed with Python's hashlib:
//   sha256(b"HloModule e2e_explain\n")[:20]  231ccaf97faae7b7d7b3 (22 bytes)
//   md5(b"-O1")[:8]                          c0404986
//   md5(b"-O2")[:8]                          b5fb2f64

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/storage/lock.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

using nlohmann::json;

const std::string kBundleVersionDir = std::string("neuronxcc-") + kStandinVersion;
const std::string kBundleKeyO1 = kBundleVersionDir + "/MODULE_231ccaf97faae7b7d7b3+c0404986";
const std::string kBundleKeyO2 = kBundleVersionDir + "/MODULE_231ccaf97faae7b7d7b3+b5fb2f64";

class S3Bundles : public S3CacheTest {
protected:
  // The environment of node `node`: its own mirror of the S3 cache.
  std::map<std::string, std::string> on_node(const std::string& node, const std::string& flags = "") const {
    return {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / node).string()},
            {"NEURON_CC_FLAGS", std::string("--cache_dir=") + kUrl + (flags.empty() ? "" : " " + flags)}};
  }
  // A cache in a local directory, no S3.
  std::map<std::string, std::string> local(const std::string& name) const {
    return {{"NEURON_CC_FLAGS", "--cache_dir=" + (dir() / name).string()}};
  }
  void compile_on(const std::map<std::string, std::string>& env, const std::string& name, const std::string& text) {
    auto run = run_tool("neuron_cc_wrapper",
                        {"compile", "--graph", graph(name, text).string(), "--output", (dir() / (name + ".neff")).string()},
                        env);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
  }
  json tool_json(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                 int expected_exit = 0) {
    std::vector<std::string> all = {"--json"};
    all.insert(all.end(), args.begin(), args.end());
    auto run = run_tool("neuron_cache", all, env);
    EXPECT_EQ(run.exit_code, expected_exit) << run.describe();
    return json::parse(run.out, nullptr, false);
  }
  // A bundle of two done entries, made from a local cache; their keys.
  std::vector<std::string> local_bundle(const fs::path& bundle) {
    compile_on(local("made-here"), "a.hlo", "HloModule a\n");
    compile_on(local("made-here"), "b.hlo", "HloModule b\n");
    auto report = tool_json({"export", "--all", "-o", bundle.string()}, local("made-here"));
    EXPECT_EQ(report["entries"], 2) << report.dump();
    return report["exported"].get<std::vector<std::string>>();
  }
};

TEST_F(S3Bundles, ExportTakesS3sEntriesFromAnotherNodeAndRecordsNoUse) {
  compile_on(on_node("node-a"), "a.hlo", "HloModule a\n");
  compile_on(on_node("node-a"), "b.hlo", "HloModule b\n");
  ASSERT_TRUE(client()->put_object(kS3TestBucket, version_dir() + "/MODULE_1111111111111111+2222222222222222/"
                                                                   "model.hlo_module.pb", "HloModule pending\n").ok());
  const auto before = objects();
  ASSERT_EQ(before.size(), 11u) << ::testing::PrintToString(before);

  // Node B has never used the cache: its mirror is empty.
  fs::path bundle = dir() / "from-s3.tar.zst";
  auto report = tool_json({"export", "--all", "-o", bundle.string()}, on_node("node-b"));
  EXPECT_EQ(report["entries"], 2) << report.dump();
  EXPECT_EQ(report["skipped"].size(), 0u) << report.dump();
  EXPECT_EQ(report["unverified"], 0) << report.dump();
  EXPECT_EQ(objects(), before); // an export is not a use: no npc-last-use
  EXPECT_EQ(test::names_in(mirror_version_dir("node-b")).size(), 2u);

  // The bundle serves a cache that never saw S3.
  auto imported = run_tool("neuron_cache", {"import", bundle.string()}, local("elsewhere"));
  EXPECT_EQ(imported.exit_code, 0) << imported.describe();
  EXPECT_EQ(imported.out, "2 imported, 0 skipped, 0 rejected\n");
  const std::size_t compiled = compiles();
  compile_on(local("elsewhere"), "a.hlo", "HloModule a\n");
  EXPECT_EQ(compiles(), compiled); // a hit
}

TEST_F(S3Bundles, ExportFromAReportSkipsWhatS3DoesNotHold) {
  compile_on(on_node("node-a"), "a.hlo", "HloModule a\n");
  auto listed = tool_json({"ls"}, on_node("node-a"));
  ASSERT_EQ(listed["entries"].size(), 1u) << listed.dump();
  const std::string there = listed["entries"][0]["key"];
  const std::string gone = kBundleVersionDir + "/MODULE_1111111111111111+2222222222222222";
  fs::path report = dir() / "report.json";
  write_text(report, json{{"compilation_report",
                           {{there + "/model.hlo_module.pb", {{"key", there}, {"status", "compiled"}}},
                            {gone + "/model.hlo_module.pb", {{"key", gone}, {"status", "compiled"}}}}}}
                         .dump());
  auto run = run_tool("neuron_cache", {"export", "--from-report", report.string(), "-o", (dir() / "b.tar.zst").string()},
                      on_node("node-b"));
  EXPECT_EQ(run.exit_code, 1) << run.describe();
  EXPECT_EQ(run.out.substr(0, run.out.find('\n') + 1),
            "SKIPPED " + gone + ": no result in " + kUrl + "/" + gone + "\n");
  EXPECT_NE(run.out.find("exported 1 entries"), std::string::npos) << run.out;
}

TEST_F(S3Bundles, ImportUploadsEveryEntryAndKeepsWhatS3HasAlready) {
  fs::path bundle = dir() / "made-here.tar.zst";
  auto keys = local_bundle(bundle);
  ASSERT_EQ(keys.size(), 2u);

  auto run = run_tool("neuron_cache", {"import", bundle.string()}, on_node("node-b"));
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(run.out, "2 imported, 0 skipped, 0 rejected\n");
  EXPECT_EQ(objects(), done_entries(2));

  // Node C finds both in S3: no compile.
  const std::size_t compiled = compiles();
  compile_on(on_node("node-c"), "a.hlo", "HloModule a\n");
  compile_on(on_node("node-c"), "b.hlo", "HloModule b\n");
  EXPECT_EQ(compiles(), compiled);

  // Imported again, from a node whose mirror has them and from one whose
  // mirror has not: S3's results stay.
  for (const std::string node : {"node-b", "node-d"}) {
    auto again = tool_json({"import", bundle.string()}, on_node(node));
    EXPECT_EQ(again["imported"], 0) << node << again.dump();
    ASSERT_EQ(again["skipped_entries"].size(), 2u) << node << again.dump();
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(again["skipped_entries"][i]["key"], keys[i]);
      EXPECT_EQ(again["skipped_entries"][i]["reason"], "has a result in " + std::string(kUrl) + "/" + keys[i] + " already");
    }
  }
  // Node C's hits marked their use; nothing else changed.
  EXPECT_EQ(objects(false), done_entries(2));
}

TEST_F(S3Bundles, ImportLeavesAnEntryAnotherNodeHoldsToItsCompile) {
  fs::path bundle = dir() / "made-here.tar.zst";
  auto keys = local_bundle(bundle);
  ASSERT_EQ(keys.size(), 2u);
  const std::string lock_key = "team/" + keys[0] + "/model.hlo_module.pb.lock";
  const auto until = std::chrono::duration_cast<std::chrono::seconds>(
                         (std::chrono::system_clock::now() + std::chrono::minutes(10)).time_since_epoch())
                         .count();
  const std::string record = storage::LockRecord{"pid 1 on another-host", "t", until}.serialize();
  ASSERT_TRUE(client()->put_object(kS3TestBucket, lock_key, record).ok());

  auto report = tool_json({"import", bundle.string()}, on_node("node-b"));
  EXPECT_EQ(report["imported_keys"], json::array({keys[1]})) << report.dump();
  ASSERT_EQ(report["skipped_entries"].size(), 1u) << report.dump();
  EXPECT_EQ(report["skipped_entries"][0]["key"], keys[0]);
  const std::string reason = report["skipped_entries"][0]["reason"];
  EXPECT_TRUE(reason.starts_with("held in " + std::string(kUrl) + "/" + keys[0] + " by 'pid 1 on another-host', until "))
      << reason;
  EXPECT_TRUE(reason.ends_with("; left to its compile")) << reason;
  // The held entry has only its lock in S3; the other is whole.
  auto expected = done_entries(1);
  expected.push_back(version_dir() + "/E/model.hlo_module.pb.lock");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(objects(), expected);
}

TEST_F(S3Bundles, ExplainComparesWithS3sEntriesByFileKeyAndUrl) {
  compile_on(on_node("node-a", "-O1"), "g.pb", "HloModule e2e_explain\n");
  compile_on(on_node("node-a"), "other.pb", "HloModule other graph of another size\n");
  const std::string url = std::string(kUrl) + "/" + kBundleKeyO1;

  // A graph file here, with other flags: node B's mirror is empty.
  auto miss = run_tool("neuron_cache", {"explain", (dir() / "graphs" / "g.pb").string()}, on_node("node-b", "-O2"));
  ASSERT_EQ(miss.exit_code, 0) << miss.describe();
  EXPECT_EQ(miss.out, "graph: " + (dir() / "graphs" / "g.pb").string() + " (22 bytes)\n"
                      "current: compiler version " + kStandinVersion + ", flags -O2\n"
                      "1 entry has this graph:\n"
                      "  " + kBundleKeyO1 + ": done; flags added: -O2; flags removed: -O1; same compiler version\n"
                      "a run with the current flags and compiler (key " + kBundleKeyO2 +
                      " as neuron_cc_wrapper compile names it; the framework names a graph by a hash of its own that "
                      "cannot be computed from the bytes: give its entry to see that key) will miss: no entry has "
                      "this graph with these flags and this version\n");

  // The entry in S3, named by its key, its URL or its graph's URL.
  const std::string hit = "graph: " + url + "/model.hlo_module.pb (22 bytes)\n"
                          "current: compiler version " + kStandinVersion + ", flags -O1\n"
                          "1 entry has this graph:\n"
                          "  " + kBundleKeyO1 + ": done; same flags; same compiler version\n"
                          "a run with the current flags and compiler (key " + kBundleKeyO1 + ") will hit: entry " +
                          kBundleKeyO1 + " is done\n";
  for (const std::string& target : {kBundleKeyO1, url, url + "/", url + "/model.hlo_module.pb"}) {
    auto run = run_tool("neuron_cache", {"explain", target}, on_node("node-b", "-O1"));
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    EXPECT_EQ(run.out, hit) << target;
  }
  auto as_json = tool_json({"explain", kBundleKeyO1}, on_node("node-b", "-O1"));
  ASSERT_EQ(as_json["matches"].size(), 1u) << as_json.dump();
  EXPECT_EQ(as_json["matches"][0]["path"], url);
  EXPECT_EQ(as_json["outcome"], "hit");

  // A key S3 does not hold.
  const std::string absent = kBundleVersionDir + "/MODULE_1111111111111111+2222222222222222";
  auto unknown = run_tool("neuron_cache", {"explain", absent}, on_node("node-b"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.describe();
  EXPECT_EQ(unknown.err, "neuron_cache: error: explain: '" + absent +
                             "' is no graph file, entry directory or key of the cache " + kUrl +
                             " (give a model.hlo_module.pb, an entry directory, neuronxcc-<version>/MODULE_<hash>+<hash>, " +
                             kUrl + "/neuronxcc-<version>/MODULE_<hash>+<hash>, or MODULE_<hash>+<hash> as neuron_cache ls "
                             "prints it)\n");
  // Looking leaves no trace in S3 or in the mirror.
  EXPECT_FALSE(fs::exists(dir() / "node-b" / "s3" / "test-bucket" / "team" / kBundleVersionDir));
}

TEST_F(S3Bundles, UsedSinceTakesTheLastUsesS3Lists) {
  compile_on(on_node("node-a"), "a.hlo", "HloModule a\n");
  compile_on(on_node("node-a"), "b.hlo", "HloModule b\n");
  compile_on(on_node("node-b"), "a.hlo", "HloModule a\n"); // a use of a, recorded in S3
  // Every entry was used seconds ago, by S3's clock (an entry read with no
  // time would date from 1970 and be left out).
  auto report = tool_json({"export", "--used-since", "1", "-o", (dir() / "b.tar.zst").string()}, on_node("node-c"));
  EXPECT_EQ(report["entries"], 2) << report.dump();
  EXPECT_EQ(report["skipped"].size(), 0u) << report.dump();
}

TEST_F(S3Bundles, AnUnreachableS3IsOneLineAndNoBundle) {
  fs::path bundle = dir() / "made-here.tar.zst";
  local_bundle(bundle);
  ASSERT_NO_FATAL_FAILURE(take_s3_away());
  for (const auto& args : std::vector<std::vector<std::string>>{{"export", "--all", "-o", (dir() / "out.tar.zst").string()},
                                                                {"import", bundle.string()}}) {
    auto run = run_tool("neuron_cache", args, on_node("node-b"));
    EXPECT_EQ(run.exit_code, 3) << run.describe();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find(s3_endpoint()), std::string::npos) << run.err;
  }
  EXPECT_FALSE(fs::exists(dir() / "out.tar.zst"));
}

} // namespace
} // namespace npc::test
