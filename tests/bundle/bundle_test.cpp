// neuron_cache export / import: round trip with the stand-in training script,
// exactness of --from-report, and bundles that are tampered with, truncated,
// hostile, from another compiler version, or imported while compiles run.

#include <csignal>
#include <cstring>
#include <set>
#include <thread>

#include <npc/bundle/staging.hpp>
#include <npc/cache/store.hpp>

#include "bundle_fixture.hpp"

namespace npc::test {
namespace {

using nlohmann::json;

const std::vector<std::string> kTrain = {"--nproc_per_node", "2", "--steps_this_run", "4"};

class BundleExportImport : public BundleTest {
protected:
  // Compiles the training script's graphs into the cache at base("src") and
  // exports them all to dir()/bundle.tar.zst; returns the exported keys.
  std::vector<std::string> make_bundle(std::vector<std::string> train_args = kTrain,
                                       std::map<std::string, std::string> env = {}) {
    auto trained = train_in(base("src"), train_args, env);
    EXPECT_EQ(trained.exit_code, 0) << trained.describe();
    auto exported = cache_json(base("src"), {"export", "--all", "-o", bundle().string()}, 0);
    std::vector<std::string> keys = exported["exported"].get<std::vector<std::string>>();
    EXPECT_EQ(keys, done_keys(root_of(base("src"))));
    EXPECT_FALSE(keys.empty());
    return keys;
  }
  fs::path bundle() const { return dir() / "bundle.tar.zst"; }
  fs::path dst() const { return base("dst"); }

  void expect_verifies(const fs::path& cache_base) {
    auto r = tool_in(cache_base, "neuron_cache", {"verify"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
  // Nothing of the import is left in the cache's private folder.
  void expect_no_staging(const fs::path& cache_base) {
    std::error_code ec;
    for (fs::directory_iterator it(root_of(cache_base) / ".npc", ec), end; !ec && it != end; it.increment(ec))
      EXPECT_FALSE(it->path().filename().string().starts_with("import-")) << it->path();
  }
};

TEST_F(BundleExportImport, RoundTripIntoAnEmptyCacheCompilesNothing) {
  auto keys = make_bundle();
  std::size_t compiled = compiles();
  ASSERT_EQ(compiled, keys.size());

  json manifest = bundle_manifest(bundle());
  EXPECT_EQ(manifest["format"], 1);
  EXPECT_EQ(manifest["tool_version"], NPC_VERSION);
  EXPECT_TRUE(manifest["created"].is_string());
  ASSERT_EQ(manifest["entries"].size(), keys.size());
  for (const auto& e : manifest["entries"]) {
    fs::path entry = root_of(base("src")) / e["key"].get<std::string>();
    EXPECT_EQ(e["compiler_version"], kStandinVersion);
    EXPECT_EQ(e["state"], "done");
    EXPECT_TRUE(e["flags"].is_array());
    EXPECT_EQ(e["files"]["model.neff"]["sha256"], sha256_of(read_text(entry / "model.neff")));
    EXPECT_EQ(e["files"]["model.neff"]["bytes"], fs::file_size(entry / "model.neff"));
    EXPECT_TRUE(e["files"].contains("model.hlo_module.pb"));
    EXPECT_FALSE(e["files"].contains("model.done"));
  }

  json imported = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(imported["imported"], keys.size());
  EXPECT_EQ(imported["skipped"], 0);
  EXPECT_TRUE(imported["rejected"].empty());
  EXPECT_EQ(done_keys(root_of(dst())), keys);
  expect_verifies(dst());
  expect_no_staging(dst());

  auto trained = train_in(dst(), kTrain);
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_EQ(summary_field(trained.out, "jit_compiles"), 0) << trained.out;
  EXPECT_GT(summary_field(trained.out, "cache_hits"), 0) << trained.out;
  EXPECT_EQ(compiles(), compiled) << "the stand-in compiler ran again";

  // Importing again changes nothing: every entry is done here already.
  json again = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(again["imported"], 0);
  EXPECT_EQ(again["skipped"], keys.size());
}

// As after `tar -x` and `tar -c --zstd` with GNU tar: a member for every
// folder before the files in it. The folders carry nothing; the import is
// whole and exits 0. A folder named outside the layout is still refused.
TEST_F(BundleExportImport, FolderMembersOfARepackedBundleAreIgnored) {
  auto keys = make_bundle();
  std::vector<Member> repacked;
  std::set<std::string> folders;
  for (const auto& m : read_bundle(bundle())) {
    std::string name = m.name;
    for (auto slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1))
      if (folders.insert(name.substr(0, slash + 1)).second)
        repacked.push_back(Member(name.substr(0, slash + 1), "", Member::Type::directory));
    repacked.push_back(m);
  }
  ASSERT_GE(folders.size(), 1 + 1 + keys.size()) << "entries/, the version folder and one per entry";
  write_bundle(bundle(), repacked);

  json imported = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(imported["imported"], keys.size());
  EXPECT_TRUE(imported["rejected"].empty()) << imported.dump();
  EXPECT_EQ(done_keys(root_of(dst())), keys);
  expect_verifies(dst());

  repacked.insert(repacked.begin() + 1, Member("entries/../x/", "", Member::Type::directory));
  write_bundle(bundle(), repacked);
  json hostile = cache_json(base("dst2"), {"import", bundle().string()}, 1);
  ASSERT_EQ(hostile["rejected"].size(), 1u) << hostile.dump();
  EXPECT_EQ(hostile["imported"], keys.size());
  EXPECT_FALSE(fs::exists(base("dst2") / "x"));
}

TEST_F(BundleExportImport, FromReportTakesExactlyTheGraphsOfThatRun) {
  fs::path report = dir() / "report.json";
  auto run = tool_in(base("src"), "neuron_parallel_compile",
                     {"--report", report.string(), "--", (standin_dir() / "standin_train").string(), "--nproc_per_node",
                      "2", "--steps_this_run", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  // Another model, compiled just in time into the same cache afterwards.
  auto other = train_in(base("src"), {"--steps_this_run", "4", "--layers", "3", "--graphs_per_step", "2"});
  ASSERT_EQ(other.exit_code, 0) << other.describe();

  std::set<std::string> reported;
  json report_doc = json::parse(read_text(report));
  for (const auto& [graph, record] : report_doc["compilation_report"].items()) reported.insert(record["key"]);
  ASSERT_FALSE(reported.empty());
  ASSERT_GT(done_keys(root_of(base("src"))).size(), reported.size());

  json exported = cache_json(base("src"), {"export", "--from-report", report.string(), "-o", bundle().string()}, 0);
  std::set<std::string> in_bundle;
  json manifest = bundle_manifest(bundle());
  for (const auto& e : manifest["entries"]) in_bundle.insert(e["key"]);
  EXPECT_EQ(in_bundle, reported);
  EXPECT_EQ(exported["entries"], reported.size());

  // A reported graph this cache no longer has: the bundle is written without
  // it, and the export says so (exit 1).
  std::string missing = std::string("neuronxcc-") + kStandinVersion + "/MODULE_0123456789abcdef0123+89abcdef";
  report_doc["compilation_report"]["/elsewhere/" + missing + "/model.hlo_module.pb"] = {{"key", missing},
                                                                                        {"status", "compiled"}};
  write_text(report, report_doc.dump());
  json partial = cache_json(base("src"), {"export", "--from-report", report.string(), "-o", bundle().string()}, 1);
  ASSERT_EQ(partial["skipped"].size(), 1u);
  EXPECT_EQ(partial["skipped"][0]["key"], missing);
  EXPECT_EQ(partial["entries"], reported.size());

  auto usage = tool_in(base("src"), "neuron_cache", {"export", "--all", "--from-report", report.string(), "-o", "x"});
  EXPECT_EQ(usage.exit_code, 2) << usage.describe();
}

TEST_F(BundleExportImport, TamperedNeffRejectsThatEntryAndImportsTheOthers) {
  auto keys = make_bundle();
  auto members = read_bundle(bundle());
  std::string victim;
  for (auto& m : members) {
    if (m.name.ends_with("/model.neff")) {
      m.data[m.data.size() / 2] ^= 0x20;
      victim = m.name.substr(std::string("entries/").size());
      victim = victim.substr(0, victim.rfind('/'));
      break;
    }
  }
  ASSERT_FALSE(victim.empty());
  write_bundle(bundle(), members);

  json imported = cache_json(dst(), {"import", bundle().string()}, 1);
  ASSERT_EQ(imported["rejected"].size(), 1u) << imported.dump(1);
  EXPECT_EQ(imported["rejected"][0]["key"], victim);
  EXPECT_NE(imported["rejected"][0]["reason"].get<std::string>().find("model.neff"), std::string::npos);
  EXPECT_EQ(imported["imported"], keys.size() - 1);
  EXPECT_FALSE(fs::exists(root_of(dst()) / victim)) << "nothing of a rejected entry may become visible";
  expect_verifies(dst());
  expect_no_staging(dst());

  // The text output names it too.
  auto text = tool_in(base("dst2"), "neuron_cache", {"import", bundle().string()});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("REJECTED " + victim), std::string::npos) << text.describe();
}

TEST_F(BundleExportImport, TruncatedBundleImportsNothingBroken) {
  // Large enough that the cut falls well after the first entries (zstd is
  // decoded in blocks of about 128 KiB; the block the cut falls in is lost whole).
  auto keys = make_bundle({"--steps_this_run", "6", "--graphs_per_step", "3", "--hidden", "4096", "--layers", "8"});
  std::string bytes = read_text(bundle());
  ASSERT_GT(bytes.size(), 1000u);
  write_text(bundle(), bytes.substr(0, bytes.size() * 6 / 10));

  json imported = cache_json(dst(), {"import", bundle().string()}, 1);
  ASSERT_FALSE(imported["rejected"].empty()) << imported.dump(1);
  std::size_t imported_count = imported["imported"];
  EXPECT_EQ(imported_count + imported["rejected"].size(), keys.size()) << imported.dump(1);
  bool says_truncated = false;
  for (const auto& r : imported["rejected"]) {
    EXPECT_FALSE(fs::exists(root_of(dst()) / r["key"].get<std::string>())) << r.dump();
    says_truncated = says_truncated || r["reason"].get<std::string>().find("truncated") != std::string::npos;
  }
  EXPECT_TRUE(says_truncated) << imported.dump(1);
  EXPECT_EQ(done_keys(root_of(dst())).size(), imported_count);
  EXPECT_EQ(all_keys(root_of(dst())).size(), imported_count);
  expect_verifies(dst());
  expect_no_staging(dst());

  // Cut inside the manifest: nothing at all.
  write_text(bundle(), bytes.substr(0, 60));
  auto r = tool_in(base("dst3"), "neuron_cache", {"import", bundle().string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(all_keys(root_of(base("dst3"))).empty());
}

// A bundle from a hostile or broken producer: its member names and types.
TEST_F(BundleExportImport, MemberPathsNeverLandOutsideTheCache) {
  const std::string v = std::string("neuronxcc-") + kStandinVersion;
  const std::string good = v + "/MODULE_00000000000000000001+00000001";
  const std::string linked = v + "/MODULE_00000000000000000002+00000002";
  const std::string neff = "STANDIN-NEFF 1\nnot a real one\n";
  auto record = [&](const std::string& key) {
    return json{{"key", key},
                {"compiler_version", kStandinVersion},
                {"state", "done"},
                {"flags", json::array()},
                {"files", {{"model.neff", {{"bytes", neff.size()}, {"sha256", sha256_of(neff)}}}}}};
  };
  json manifest = {{"format", 1}, {"tool_version", "0"}, {"created", "x"}, {"entries", {record(good), record(linked)}}};
  fs::path outside = dir() / "outside";
  fs::create_directories(outside);
  write_bundle(bundle(), {{"manifest.json", manifest.dump()},
                          {"../evil", "x"},
                          {"../../outside/evil", "x"},
                          {(outside / "abs-evil").string(), "x"},
                          {"entries/" + v + "/../../outside/evil2", "x"},
                          {"entries/" + good + "/../../../evil3", "x"},
                          {"./entries/" + good + "/model.neff", neff},
                          {"entries/" + good + "/model.neff", neff},
                          {"entries/" + linked + "/model.neff", "", Member::Type::symlink, "/etc/passwd"},
                          {"entries/" + linked + "/model.hlo_module.pb", "", Member::Type::hardlink,
                           "entries/" + good + "/model.neff"},
                          {"entries/" + v + "/MODULE_00000000000000000003+00000003", "", Member::Type::directory}});

  json imported = cache_json(dst(), {"import", bundle().string()}, 1);
  EXPECT_EQ(imported["imported_keys"], json::array({good})) << imported.dump(1);
  std::set<std::string> rejected;
  for (const auto& r : imported["rejected"]) rejected.insert(r["key"]);
  EXPECT_TRUE(rejected.contains("../evil")) << imported.dump(1);
  EXPECT_TRUE(rejected.contains((outside / "abs-evil").string())) << imported.dump(1);
  EXPECT_TRUE(rejected.contains(linked)) << imported.dump(1);
  EXPECT_FALSE(fs::exists(root_of(dst()) / linked));
  EXPECT_EQ(read_text(root_of(dst()) / good / "model.neff"), neff);

  // Nothing named evil anywhere, no symlink in the cache, nothing outside.
  for (const auto& e : fs::recursive_directory_iterator(dir())) {
    EXPECT_EQ(e.path().filename().string().find("evil"), std::string::npos) << e.path();
    if (e.path().string().starts_with(root_of(dst()).string())) {
      EXPECT_FALSE(fs::is_symlink(fs::symlink_status(e.path()))) << e.path();
    }
  }
  EXPECT_TRUE(fs::is_empty(outside));
  expect_no_staging(dst());
}

// An entry folder of the local cache that is a symlink (planted there, say)
// fails the cache's trust check: the import skips it and writes nothing
// through it.
TEST_F(BundleExportImport, SymlinkedLocalEntryIsNotWrittenThrough) {
  auto keys = make_bundle();
  fs::path elsewhere = dir() / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directories((root_of(dst()) / keys.front()).parent_path());
  fs::create_directory_symlink(elsewhere, root_of(dst()) / keys.front());

  json imported = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(imported["imported"], keys.size() - 1);
  ASSERT_EQ(imported["skipped_entries"].size(), 1u) << imported.dump(1);
  EXPECT_EQ(imported["skipped_entries"][0]["key"], keys.front());
  EXPECT_NE(imported["skipped_entries"][0]["reason"].get<std::string>().find("symlink"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

// SIGTERM or ^C while an export writes: the bundle is published by temp +
// rename beside the output, and the temp must not stay there.
// Whether `pid` has a file open under `dir` (an unnamed one shows there as
// "<dir>/#<inode> (deleted)").
bool writes_under(pid_t pid, const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code link_ec;
    auto target = fs::read_symlink(it->path(), link_ec);
    if (!link_ec && target.string().starts_with(dir.string() + "/")) return true;
  }
  return false;
}

TEST_F(BundleExportImport, AnExportEndedBySignalLeavesNoTempBesideTheOutput) {
  cache::Cache cache(root_of(base("src")));
  ASSERT_TRUE(cache.ensure_root().ok());
  fs::path entry = cache.entry_dir(cache::CacheKey{kStandinVersion, "00000000000000000001", "00000001"});
  ASSERT_TRUE(cache.entry(entry).store_graph("graph", {"-O2"}).ok());
  // Incompressible and large, so the export is still writing when signalled.
  std::string neff(96U << 20U, '\0');
  std::uint64_t x = 88172645463325252ULL;
  for (std::size_t i = 0; i + 8 <= neff.size(); i += 8) {
    x ^= x << 13U, x ^= x >> 7U, x ^= x << 17U;
    std::memcpy(&neff[i], &x, 8);
  }
  write_text(dir() / "big.neff", neff);
  {
    auto lock = cache.entry(entry).lock(std::chrono::seconds(5));
    ASSERT_TRUE(lock.ok() && std::holds_alternative<storage::Lock>(*lock));
    cache::AttemptRecord record;
    record.attempt = 1;
    record.outcome = "success";
    ASSERT_TRUE(cache.entry(entry).publish_success(dir() / "big.neff", record).ok());
  }
  fs::path out_dir = dir() / "out";
  fs::create_directories(out_dir);

  // SIGKILL too: the output is an unnamed file until it is published, so
  // not even a kill that runs no handler leaves a temp behind.
  for (int signal_number : {SIGTERM, SIGINT, SIGKILL}) {
    RunOptions run = options(env_for(base("src")));
    Child exporter({tool_path("neuron_cache"), "export", "--all", "-o", (out_dir / "b.tar.zst").string()}, run,
                   dir() / ("export-" + std::to_string(signal_number)));
    bool writing = false;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         !writing && exporter.running() && std::chrono::steady_clock::now() < until;) {
      writing = writes_under(exporter.pid(), out_dir);
      if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(writing) << "the export ended before it was seen writing its output";
    exporter.kill(signal_number);
    RunResult r = exporter.wait();
    ASSERT_TRUE(r.signaled) << r.describe();
    EXPECT_EQ(r.signal, signal_number);
    EXPECT_EQ(names_in(out_dir), std::vector<std::string>{}) << "left beside the output";
  }
}

TEST_F(BundleExportImport, SizesAreCappedByTheManifest) {
  const std::string key = std::string("neuronxcc-") + kStandinVersion + "/MODULE_00000000000000000001+00000001";
  const std::string neff(4096, 'n');
  auto manifest_with = [&](std::uint64_t bytes) {
    return json{{"format", 1},
                {"entries",
                 {{{"key", key},
                   {"compiler_version", kStandinVersion},
                   {"files", {{"model.neff", {{"bytes", bytes}, {"sha256", sha256_of(neff)}}}}}}}}}
        .dump();
  };
  // A member larger than the manifest says.
  write_bundle(bundle(), {{"manifest.json", manifest_with(100)}, {"entries/" + key + "/model.neff", neff}});
  json imported = cache_json(dst(), {"import", bundle().string()}, 1);
  ASSERT_EQ(imported["rejected"].size(), 1u);
  EXPECT_NE(imported["rejected"][0]["reason"].get<std::string>().find("bytes"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_of(dst()) / key));

  // A manifest promising more than the disk holds: refused before staging.
  write_bundle(bundle(), {{"manifest.json", manifest_with(1ULL << 60)}, {"entries/" + key + "/model.neff", neff}});
  json full = cache_json(dst(), {"import", bundle().string()}, 3);
  EXPECT_NE(full["error"].get<std::string>().find("free"), std::string::npos) << full.dump(1);

  // Not a bundle at all.
  write_bundle(bundle(), {{"entries/" + key + "/model.neff", neff}, {"manifest.json", manifest_with(neff.size())}});
  auto r = tool_in(dst(), "neuron_cache", {"import", bundle().string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("manifest.json"), std::string::npos) << r.describe();
  write_text(bundle(), "just some text\n");
  EXPECT_EQ(tool_in(dst(), "neuron_cache", {"import", bundle().string()}).exit_code, 1);
  EXPECT_TRUE(all_keys(root_of(dst())).empty());
}

TEST_F(BundleExportImport, AnotherCompilerVersionStaysUnderItsOwnFolder) {
  const std::string other = "9.9.9+other";
  fs::path compiler_b = compiler_copy("cc-b");
  auto keys = make_bundle({"--steps_this_run", "4"},
                          {{"NEURON_CC", compiler_b.string()}, {"STANDIN_CC_VERSION", other}});
  for (const auto& k : keys) EXPECT_TRUE(k.starts_with("neuronxcc-" + other + "/")) << k;
  std::size_t compiled = compiles();

  json imported = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(imported["imported"], keys.size());
  EXPECT_EQ(done_keys(root_of(dst())), keys);
  EXPECT_FALSE(fs::exists(root_of(dst()) / (std::string("neuronxcc-") + kStandinVersion)));

  // The stand-in at its own version is not served the other version's NEFFs.
  auto trained = train_in(dst(), {"--steps_this_run", "4"});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  EXPECT_EQ(summary_field(trained.out, "jit_compiles"), static_cast<long>(keys.size())) << trained.out;
  EXPECT_EQ(compiles(), compiled + keys.size());
  // The compiler of that version is.
  auto served = train_in(dst(), {"--steps_this_run", "4"},
                         {{"NEURON_CC", compiler_b.string()}, {"STANDIN_CC_VERSION", other}});
  ASSERT_EQ(served.exit_code, 0) << served.describe();
  EXPECT_EQ(summary_field(served.out, "jit_compiles"), 0) << served.out;
  EXPECT_EQ(compiles(), compiled + keys.size());
  expect_verifies(dst());
}

TEST_F(BundleExportImport, FailedEntriesOnlyWhenAsked) {
  fs::path bad = dir() / "bad.hlo", good = dir() / "good.hlo";
  write_text(bad, "HloModule bad\n// please-fail\n");
  write_text(good, "HloModule good\n");
  std::map<std::string, std::string> fault = {{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_MATCH", "please-fail"}};
  EXPECT_EQ(tool_in(base("src"), "neuron_cc_wrapper",
                    {"compile", "--graph", bad.string(), "--output", (dir() / "bad.neff").string()}, fault)
                .exit_code,
            1);
  EXPECT_EQ(tool_in(base("src"), "neuron_cc_wrapper",
                    {"compile", "--graph", good.string(), "--output", (dir() / "good.neff").string()}, fault)
                .exit_code,
            0);
  std::size_t compiled = compiles();

  json plain = cache_json(base("src"), {"export", "--all", "-o", bundle().string()}, 0);
  EXPECT_EQ(plain["entries"], 1);
  EXPECT_EQ(plain["left_out"].size(), 1u);
  json with_failed =
      cache_json(base("src"), {"export", "--all", "--include-failed", "-o", bundle().string()}, 0);
  EXPECT_EQ(with_failed["entries"], 2);
  EXPECT_EQ(with_failed["failed_entries"], 1);

  json skipped = cache_json(dst(), {"import", bundle().string()}, 0);
  EXPECT_EQ(skipped["imported"], 1);
  EXPECT_EQ(skipped["skipped"], 1);
  EXPECT_EQ(done_keys(root_of(dst())).size(), 1u);
  EXPECT_EQ(all_keys(root_of(dst())).size(), 1u);

  json taken = cache_json(base("dst2"), {"import", "--include-failed", bundle().string()}, 0);
  EXPECT_EQ(taken["imported"], 2);
  auto cached_failure = tool_in(base("dst2"), "neuron_cc_wrapper",
                                {"compile", "--graph", bad.string(), "--output", (dir() / "bad2.neff").string()});
  EXPECT_EQ(cached_failure.exit_code, 1) << cached_failure.describe();
  EXPECT_NE(cached_failure.out.find("Got a cached failed neff"), std::string::npos) << cached_failure.describe();
  EXPECT_EQ(compiles(), compiled);
}

// 8 imports and 8 just-in-time compiles of the same graphs at once: each graph
// ends done, published exactly once (by an import or by a compile).
TEST_F(BundleExportImport, ImportRacingWithCompiles) {
  fs::path workdir = dir() / "work";
  auto keys = make_bundle({"--steps_this_run", "5", "--graphs_per_step", "3", "--workdir", workdir.string()});
  auto graphs = graphs_in(workdir);
  ASSERT_EQ(graphs.size(), keys.size());
  std::size_t compiled_before = compiles();

  fs::path out = dir() / "race";
  fs::create_directories(out);
  std::string script = "set -u\n";
  for (int i = 0; i < 8; ++i) {
    std::string n = std::to_string(i);
    // The report alone on stdout: a stale lock the import clears (a
    // wrapper's, gone a moment before) is said on stderr.
    script += "(neuron_cache --json import " + bundle().string() + " > " + (out / ("import." + n + ".json")).string() +
              " 2> " + (out / ("import." + n + ".err")).string() + "; echo $? > " +
              (out / ("import." + n + ".rc")).string() + ") &\n";
    script += "(rc=0; for g in";
    for (const auto& g : graphs) script += " " + g.string();
    script += "; do neuron_cc_wrapper compile --graph \"$g\" --output " + (out / ("cc." + n + ".")).string() +
              "$(basename \"$g\").neff >> " + (out / ("cc." + n + ".log")).string() +
              " 2>&1 || rc=1; done; echo $rc > " + (out / ("cc." + n + ".rc")).string() + ") &\n";
  }
  script += "wait\n";
  auto r = run({"/bin/sh", "-c", script}, options(env_for(dst(), {{"STANDIN_CC_BASE_MS", "40"}})));
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  std::size_t imported = 0;
  for (int i = 0; i < 8; ++i) {
    std::string n = std::to_string(i);
    EXPECT_EQ(read_text(out / ("import." + n + ".rc")), "0\n")
        << read_text(out / ("import." + n + ".json")) << read_text(out / ("import." + n + ".err"));
    EXPECT_EQ(read_text(out / ("cc." + n + ".rc")), "0\n") << read_text(out / ("cc." + n + ".log"));
    json doc = json::parse(read_text(out / ("import." + n + ".json")));
    EXPECT_TRUE(doc["rejected"].empty()) << doc.dump(1);
    imported += doc["imported"].get<std::size_t>();
    for (const auto& g : graphs) {
      std::string neff = read_text(out / ("cc." + n + "." + g.filename().string() + ".neff"));
      EXPECT_NE(neff.find("graph-sha256: " + sha256_of(read_text(g))), std::string::npos) << g;
    }
  }
  std::size_t compiled = compiles() - compiled_before;
  RecordProperty("imported", std::to_string(imported));
  RecordProperty("compiled", std::to_string(compiled));
  EXPECT_LE(compiled, graphs.size());
  EXPECT_EQ(imported + compiled, graphs.size()) << "every graph is published exactly once";
  EXPECT_EQ(done_keys(root_of(dst())), keys);
  for (const auto& k : keys) {
    json meta = json::parse(read_text(root_of(dst()) / k / "npc-entry.json"));
    int successes = 0;
    for (const auto& a : meta["attempts"]) successes += a["outcome"] == "success" ? 1 : 0;
    EXPECT_EQ(successes, 1) << k;
  }
  expect_verifies(dst());
  expect_no_staging(dst());
}

// An import killed with -9 leaves its staging folder with its lock file,
// whose lock the kernel freed: the next import removes it at once. A folder
// not locked yet may be an import's that is starting: kept while young.
TEST_F(BundleTest, AStagingFolderOfAKilledImportGoesAtOnce) {
  cache::Cache cache(root_of(base("c")));
  ASSERT_TRUE(cache.ensure_root().ok());
  fs::path killed = cache.private_dir() / "import-killed";
  fs::path starting = cache.private_dir() / "import-starting";
  write_text(killed / "npc-import.lock", "pid=1 host=x start=0 tool=neuron_cache\n");
  write_text(killed / "0" / "model.neff", std::string(4096, 'n'));
  write_text(starting / "0" / "model.neff", std::string(4096, 'n'));
  bundle::remove_stale_import_staging(cache);
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(starting));
}

} // namespace
} // namespace npc::test
