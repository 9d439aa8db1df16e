// cache/usage_stats: counters that many processes add to at once lose
// nothing; a zero empties them and says when; a shard a crash cut short
// counts as empty and counting goes on.

#include <npc/cache/usage_stats.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

class UsageStatsTest : public test::TempDirTest {
protected:
  fs::path private_dir() const { return dir() / ".npc"; }
};

TEST_F(UsageStatsTest, NothingCountedReadsAsEmpty) {
  auto usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok()) << usage.error();
  EXPECT_TRUE(usage->by_program.empty());
  EXPECT_FALSE(usage->zeroed_at.has_value());
  EXPECT_TRUE(usage->total().empty());
}

// 16 processes, each counting 100 hits and 25 misses of its own program and
// of a program they share, one update at a time: every update is there.
TEST_F(UsageStatsTest, ManyProcessesCountingAtOnceLoseNothing) {
  constexpr int kProcesses = 16, kRounds = 100;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = true;
      for (int r = 0; r < kRounds; ++r) {
        UsageCounts hit;
        hit.hits = 1;
        hit.saved_seconds = 0.5;
        ok = ok && record_usage(private_dir(), kWrapperProgram, hit).ok();
        if (r % 4 == 0) {
          UsageCounts miss;
          miss.misses = 1;
          miss.compile_seconds = 2;
          ok = ok && record_usage(private_dir(), "program " + std::to_string(p % 2), miss).ok();
        }
      }
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok()) << usage.error();
  ASSERT_EQ(usage->by_program.size(), 3u);
  const UsageCounts& wrapper = usage->by_program.at(std::string(kWrapperProgram));
  EXPECT_EQ(wrapper.hits, std::uint64_t{kProcesses * kRounds});
  EXPECT_DOUBLE_EQ(wrapper.saved_seconds, kProcesses * kRounds * 0.5);
  EXPECT_EQ(usage->by_program.at("program 0").misses, std::uint64_t{kProcesses / 2 * kRounds / 4});
  EXPECT_EQ(usage->by_program.at("program 1").misses, std::uint64_t{kProcesses / 2 * kRounds / 4});
  EXPECT_EQ(usage->total().misses, std::uint64_t{kProcesses * kRounds / 4});
  EXPECT_DOUBLE_EQ(usage->total().compile_seconds, kProcesses * kRounds / 4 * 2.0);
}

TEST_F(UsageStatsTest, ZeroEmptiesEveryCounterAndSaysWhen) {
  UsageCounts hit;
  hit.hits = 3;
  ASSERT_TRUE(record_usage(private_dir(), kLauncherProgram, hit));
  const auto when = util::WallTime(std::chrono::seconds(1'790'000'000));
  ASSERT_TRUE(zero_usage(private_dir(), when));
  auto usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok()) << usage.error();
  EXPECT_TRUE(usage->by_program.empty());
  ASSERT_TRUE(usage->zeroed_at.has_value());
  EXPECT_EQ(*usage->zeroed_at, when);
  ASSERT_TRUE(record_usage(private_dir(), kLauncherProgram, hit));
  usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->total().hits, 3u);
  EXPECT_EQ(*usage->zeroed_at, when) << "counting on keeps when they were zeroed";
}

TEST_F(UsageStatsTest, AShardACrashCutShortCountsAsEmpty) {
  UsageCounts miss;
  miss.misses = 1;
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, miss));
  const fs::path shard = private_dir() / kStatsDir / (std::to_string(::getpid() % kStatsShards) + ".json");
  ASSERT_TRUE(fs::exists(shard));
  test::write_text(shard, "{\"programs\": {\"neuron_cc_wr");
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, miss));
  auto usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok()) << usage.error();
  EXPECT_EQ(usage->total().misses, 1u);
}

// Values no count of ours can reach (usage_shard.hpp) make the shard torn:
// it counts nothing, never garbage (a negative count as 18446744073709551611).
TEST_F(UsageStatsTest, AShardWithValuesOutOfRangeCountsNothing) {
  test::write_text(private_dir() / kStatsDir / "3.json", R"({"programs":{"p":{"hits":-5,"misses":1e30}}})");
  test::write_text(private_dir() / kStatsDir / "4.json", R"({"programs":{"p":{"hits":2}}})");
  auto usage = read_usage(private_dir());
  ASSERT_TRUE(usage.ok()) << usage.error();
  EXPECT_EQ(usage->total().hits, 2u);
  EXPECT_EQ(usage->total().misses, 0u);
}

TEST_F(UsageStatsTest, AHitSavesWhatTheEntrysCompileTookWhenItWasRecorded) {
  const fs::path entry = dir() / "neuronxcc-1.0" / "MODULE_a+b";
  fs::create_directories(entry);
  UsageCounts untimed = hit_of(entry); // no npc-entry.json: another tool compiled it
  EXPECT_EQ(untimed.hits, 1u);
  EXPECT_EQ(untimed.hits_without_time, 1u);
  EXPECT_EQ(untimed.saved_seconds, 0);
  EntryMeta meta;
  AttemptRecord failed{1, "failed", "exit code 70", 70, "", 1.0, 0, 0};
  AttemptRecord success{2, "success", "exit code 0", 0, "", 42.5, 0, 0};
  meta.attempts = {failed, success};
  ASSERT_TRUE(write_entry_meta(entry, meta));
  UsageCounts timed = hit_of(entry);
  EXPECT_EQ(timed.hits, 1u);
  EXPECT_EQ(timed.hits_without_time, 0u);
  EXPECT_DOUBLE_EQ(timed.saved_seconds, 42.5);
}

} // namespace
} // namespace npc::cache
