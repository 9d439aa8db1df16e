// cache/precompile_record and cache/misses: what a pre-compile records in
// its cache, and the graphs compiled after it, each judged by cause, on a
// directory cache whose graphs' times the tests set.

#include <npc/cache/misses.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "files.hpp"
#include "forwarding_storage.hpp"
#include "temp_dir.hpp"
#include "two_tiers.hpp"

namespace npc::cache {
namespace {

using std::chrono::seconds;

const util::WallTime kPrecompileStart{seconds(1'800'000'000)};
const util::WallTime kPrecompileEnd = kPrecompileStart + seconds(600);

class MissesTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "cache");
    ASSERT_TRUE(cache->ensure_root().ok());
  }
  // An entry of `key` with `flags`, its graph written at `when`.
  void entry_at(const std::string& key, const std::vector<std::string>& flags, util::WallTime when,
                bool done = false) {
    auto parsed = parse_key(key);
    ASSERT_TRUE(parsed) << key;
    const Entry entry = cache->entry(*parsed);
    ASSERT_TRUE(entry.store_graph("HloModule " + key + "\n", flags).ok());
    if (done) test::publish_test_result(entry, true, "NEFF", dir() / "result");
    ASSERT_TRUE(util::set_mtime(entry.graph_path(), when).ok());
  }
  PrecompileRecord record(util::WallTime started, util::WallTime ended, std::vector<PrecompileGraph> graphs = {}) {
    PrecompileRecord r;
    r.started = started;
    r.ended = ended;
    r.host = "trn1-a";
    r.pid = 4242;
    r.compiler_version = "2.0.0";
    r.graphs = std::move(graphs);
    return r;
  }
  std::optional<Cache> cache;
};

TEST_F(MissesTest, ARecordReadsBackAsWrittenAndOnlyTheNewestAreKept) {
  for (int i = 0; i < static_cast<int>(kKeptPrecompileRecords) + 2; ++i) {
    PrecompileRecord r = record(kPrecompileStart + seconds(60 * i), kPrecompileStart + seconds(60 * i + 30),
                                {{"neuronxcc-2.0.0/MODULE_1+aa", "compiled"}, {"neuronxcc-2.0.0/MODULE_2+aa", "failed"}});
    r.pid = 100 + i;
    ASSERT_TRUE(write_precompile_record(*cache->storage(), r).ok());
    if (i == 1) {
      EXPECT_EQ(r.name, "20270115T080100Z-trn1-a-101.json") << "sorts as the start does";
    }
  }
  // Something else in the folder is skipped with a warning, never an error.
  test::write_text(dir() / "cache" / std::string(kPrecompilesDir) / "29990101T000000Z-x-1.json", "{not json");
  auto read = read_precompile_records(*cache->storage());
  ASSERT_TRUE(read) << read.error();
  ASSERT_EQ(read->size(), kKeptPrecompileRecords);
  EXPECT_EQ(read->front().pid, 102) << "the two oldest were removed";
  EXPECT_EQ(read->back().pid, 100 + static_cast<int>(kKeptPrecompileRecords) + 1);
  EXPECT_EQ(read->back().host, "trn1-a");
  EXPECT_EQ(read->back().compiler_version, "2.0.0");
  ASSERT_EQ(read->back().graphs.size(), 2u);
  EXPECT_EQ(read->back().graphs[1].key, "neuronxcc-2.0.0/MODULE_2+aa");
  EXPECT_EQ(read->back().graphs[1].outcome, "failed");
  EXPECT_EQ(read->back().ended, read->back().started + seconds(30));
}

// Launchers of one cluster run end together: each writes its record and
// prunes the old ones while the others do, and readers look meanwhile.
TEST_F(MissesTest, ManyLaunchersRecordAtOnceAndTheNewestAreKeptWhole) {
  constexpr int kWriters = 24;
  std::vector<pid_t> children;
  for (int i = 0; i < kWriters + 4; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Cache own(dir() / "cache"); // a process of its own, with its own storage
      if (i >= kWriters) { // a reader: every record it reads is whole
        for (int round = 0; round < 50; ++round) {
          auto read = read_precompile_records(*own.storage());
          if (!read) ::_exit(2);
          for (const auto& r : *read)
            if (r.graphs.size() != 100) ::_exit(3);
        }
        ::_exit(0);
      }
      std::vector<PrecompileGraph> graphs;
      for (int g = 0; g < 100; ++g) graphs.push_back({"neuronxcc-2.0.0/MODULE_" + std::to_string(g) + "+aa", "compiled"});
      PrecompileRecord r = record(kPrecompileStart + seconds(i), kPrecompileEnd, std::move(graphs));
      r.pid = 1000 + i;
      ::_exit(write_precompile_record(*own.storage(), r).ok() ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  auto read = read_precompile_records(*cache->storage());
  ASSERT_TRUE(read) << read.error();
  ASSERT_EQ(read->size(), kKeptPrecompileRecords);
  for (std::size_t k = 0; k < read->size(); ++k) {
    EXPECT_EQ((*read)[k].pid, 1000 + kWriters - static_cast<int>(kKeptPrecompileRecords) + static_cast<int>(k));
    EXPECT_EQ((*read)[k].graphs.size(), 100u);
  }
  EXPECT_EQ(last_precompile(*read).size(), kKeptPrecompileRecords) << "one run: their times overlap";
}

// A record listed, then pruned by a launcher recording meanwhile, before it
// is read: skipped without a warning (it was the oldest); one that is there
// but cannot be read still warns.
TEST_F(MissesTest, ARecordPrunedAsItIsReadIsSkippedQuietly) {
  PrecompileRecord kept = record(kPrecompileStart, kPrecompileEnd);
  ASSERT_TRUE(write_precompile_record(*cache->storage(), kept).ok());
  struct ListingAPrunedRecord : test::ForwardingStorage {
    using ForwardingStorage::ForwardingStorage;
    Result<std::vector<std::string>> list(std::string_view dir) const override {
      auto names = ForwardingStorage::list(dir);
      if (names && dir == kPrecompilesDir) names->push_back("1799999999000-trn1-a-1.json");
      return names;
    }
  };
  ListingAPrunedRecord storage(cache->storage());
  std::ostringstream logged;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(logged)));
  auto read = read_precompile_records(storage);
  ASSERT_TRUE(util::ensure_dir(dir() / "cache" / std::string(kPrecompilesDir) / "1700000000000-trn1-a-2.json").ok());
  auto with_a_folder = read_precompile_records(storage);
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(read) << read.error();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].started, kept.started);
  ASSERT_TRUE(with_a_folder) << with_a_folder.error();
  EXPECT_EQ(with_a_folder->size(), 1u);
  const std::string text = logged.str();
  EXPECT_EQ(text.find("1799999999000-trn1-a-1.json"), std::string::npos) << text;
  EXPECT_NE(text.find("cannot read the pre-compile record"), std::string::npos) << text;
  EXPECT_NE(text.find("1700000000000-trn1-a-2.json"), std::string::npos) << text;
}

TEST_F(MissesTest, TheLastPrecompileIsTheNewestRecordAndThoseOverlappingIt) {
  std::vector<PrecompileRecord> records = {record(kPrecompileStart, kPrecompileStart + seconds(10)),
                                           record(kPrecompileStart + seconds(20), kPrecompileStart + seconds(30)),
                                           record(kPrecompileStart + seconds(25), kPrecompileStart + seconds(40))};
  records[0].pid = 1;
  records[1].pid = 2;
  records[2].pid = 3;
  auto last = last_precompile(records);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].pid, 2);
  EXPECT_EQ(last[1].pid, 3);
  EXPECT_TRUE(last_precompile({}).empty());
}

// The run's end and its graphs, whichever of its launchers took them: each
// key once, sorted, one that does not parse left out.
TEST_F(MissesTest, ARunEndsWithItsLastLauncherAndTakesEachGraphOnce) {
  const std::string a = "neuronxcc-2.0.0/MODULE_1+aaaa";
  const std::string b = "neuronxcc-2.0.0/MODULE_2+bbbb";
  std::vector<PrecompileRecord> run = {
      record(kPrecompileStart, kPrecompileStart + seconds(40), {{b, "compiled"}, {a, "failed"}}),
      record(kPrecompileStart + seconds(5), kPrecompileStart + seconds(30),
             {{a, "compiled"}, {"not a key", "compiled"}})};
  EXPECT_EQ(precompile_end(run), kPrecompileStart + seconds(40));
  std::vector<std::string> keys;
  for (const auto& key : precompile_keys(run)) keys.push_back(key.str());
  EXPECT_EQ(keys, (std::vector<std::string>{a, b}));
  EXPECT_EQ(precompile_end({}), util::WallTime{});
  EXPECT_TRUE(precompile_keys({}).empty());
}

TEST_F(MissesTest, EachGraphMadeAfterThePrecompileIsJudgedByItsKey) {
  const auto before = kPrecompileStart + seconds(1);
  const auto after = kPrecompileEnd + seconds(5);
  // The trial's graphs, made during the pre-compile.
  entry_at("neuronxcc-2.0.0/MODULE_1+aaaa", {}, before, true);
  entry_at("neuronxcc-2.0.0/MODULE_3+aaaa", {}, before, true);
  entry_at("neuronxcc-2.0.0/MODULE_5+aaaa", {}, before, true);
  // After it: a graph the trial never produced, the trial's graph 1 under
  // -O1, its graph 3 under another compiler, its graph 2 (which failed)
  // and its graph 4 (done then, evicted since) made again.
  entry_at("neuronxcc-2.0.0/MODULE_9+aaaa", {}, after);
  entry_at("neuronxcc-2.0.0/MODULE_1+bbbb", {"-O1"}, after + seconds(1), true);
  entry_at("neuronxcc-2.1.0/MODULE_3+aaaa", {}, after + seconds(2));
  entry_at("neuronxcc-2.0.0/MODULE_2+aaaa", {}, after + seconds(3));
  entry_at("neuronxcc-2.0.0/MODULE_4+aaaa", {}, after + seconds(4), true);
  std::vector<PrecompileRecord> last = {record(kPrecompileStart, kPrecompileEnd,
                                               {{"neuronxcc-2.0.0/MODULE_1+aaaa", "compiled"},
                                                {"neuronxcc-2.0.0/MODULE_2+aaaa", "failed"},
                                                {"neuronxcc-2.0.0/MODULE_3+aaaa", "cached"},
                                                {"neuronxcc-2.0.0/MODULE_4+aaaa", "compiled"},
                                                {"neuronxcc-2.0.0/MODULE_5+aaaa", "compiled"}})};
  auto listed = find_misses(*cache, last, kPrecompileEnd);
  ASSERT_TRUE(listed) << listed.error();
  const Misses& found = *listed;
  EXPECT_EQ(found.looked_at, 8u);
  EXPECT_EQ(found.precompile.size(), 1u);
  ASSERT_EQ(found.misses.size(), 5u);
  const auto& m = found.misses;
  EXPECT_EQ(m[0].key.str(), "neuronxcc-2.0.0/MODULE_9+aaaa");
  EXPECT_EQ(m[0].cause, MissCause::not_in_trial);
  EXPECT_EQ(m[0].state, EntryState::pending);
  EXPECT_FALSE(m[0].trial_key);

  EXPECT_EQ(m[1].key.str(), "neuronxcc-2.0.0/MODULE_1+bbbb");
  EXPECT_EQ(m[1].cause, MissCause::other_flags);
  EXPECT_EQ(m[1].state, EntryState::done);
  EXPECT_EQ(m[1].trial_key->str(), "neuronxcc-2.0.0/MODULE_1+aaaa");
  EXPECT_EQ(m[1].flags_added, std::vector<std::string>{"-O1"});
  EXPECT_TRUE(m[1].flags_removed.empty());

  EXPECT_EQ(m[2].key.str(), "neuronxcc-2.1.0/MODULE_3+aaaa");
  EXPECT_EQ(m[2].cause, MissCause::other_compiler_version);
  EXPECT_EQ(m[2].trial_key->str(), "neuronxcc-2.0.0/MODULE_3+aaaa");

  EXPECT_EQ(m[3].key.str(), "neuronxcc-2.0.0/MODULE_2+aaaa");
  EXPECT_EQ(m[3].cause, MissCause::failed_in_precompile);

  EXPECT_EQ(m[4].key.str(), "neuronxcc-2.0.0/MODULE_4+aaaa");
  EXPECT_EQ(m[4].cause, MissCause::made_again);
  EXPECT_EQ(m[4].written, after + seconds(4));
}

TEST_F(MissesTest, WithoutAPrecompileEveryGraphSinceIsListedAsSuch) {
  entry_at("neuronxcc-2.0.0/MODULE_1+aaaa", {}, kPrecompileStart);
  entry_at("neuronxcc-2.0.0/MODULE_2+aaaa", {}, kPrecompileEnd + seconds(1));
  auto listed = find_misses(*cache, {}, kPrecompileEnd);
  ASSERT_TRUE(listed) << listed.error();
  const Misses& found = *listed;
  ASSERT_EQ(found.misses.size(), 1u);
  EXPECT_EQ(found.misses[0].key.str(), "neuronxcc-2.0.0/MODULE_2+aaaa");
  EXPECT_EQ(found.misses[0].cause, MissCause::no_precompile);
  // A graph written exactly at the time given is not after it.
  auto at_the_time = find_misses(*cache, {}, kPrecompileEnd + seconds(1));
  ASSERT_TRUE(at_the_time) << at_the_time.error();
  EXPECT_TRUE(at_the_time->misses.empty());
}

// A cache that cannot be listed is an error, never "nothing compiled".
TEST_F(MissesTest, ACacheThatCannotBeListedIsAnError) {
  test::write_text(dir() / "not-a-folder", "a file where the cache belongs");
  const Cache unlistable(dir() / "not-a-folder");
  auto listed = find_misses(unlistable, {}, kPrecompileEnd);
  ASSERT_FALSE(listed);
  EXPECT_NE(listed.error().find("cannot list the cache " + (dir() / "not-a-folder").string()), std::string::npos)
      << listed.error();
}

} // namespace
} // namespace npc::cache
