// cache/usage_stats: counters that many processes add to at once lose
// nothing; a zero empties them and says when; a torn shard (cut short by a
// crash, garbage, values out of range, too large) counts nothing, is named,
// and counting goes on; anything else in a shard's place (a FIFO, a
// directory, a link to a device) is passed over, never read or waited on,
// named by the reader, and replaced by a zero; a shard another process
// holds is passed over by a count.

#include <npc/cache/usage_stats.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

class UsageStatsTest : public test::TempDirTest {
protected:
  fs::path private_dir() const { return dir() / ".npc"; }
  fs::path stats_dir() const { return private_dir() / kStatsDir; }
  fs::path shard(int i) const { return stats_dir() / (std::to_string(i) + ".json"); }
  // The shard this process counts in first.
  fs::path own_shard() const { return shard(static_cast<int>(::getpid() % kStatsShards)); }
  static std::string hits_text(int hits) {
    return "{\"programs\":{\"p\":{\"hits\":" + std::to_string(hits) + "}},\"zeroed_unix\":0}\n";
  }
  static UsageCounts hits(std::uint64_t n) {
    UsageCounts c;
    c.hits = n;
    return c;
  }
};

// Runs `body` in a child process that SIGALRM ends after kHangGuardSeconds:
// what would wait forever on a FIFO fails the test instead of hanging it.
// True when the child ran `body` to its end and `body` returned true.
constexpr unsigned kHangGuardSeconds = 20;
bool in_child_that_cannot_hang(const std::function<bool()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(kHangGuardSeconds);
    ::_exit(body() ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::vector<std::pair<fs::path, ShardFault>> faults_of(const UsageStats& usage) {
  std::vector<std::pair<fs::path, ShardFault>> faults;
  for (const auto& u : usage.unread) faults.emplace_back(u.path, u.fault);
  return faults;
}

TEST_F(UsageStatsTest, NothingCountedReadsAsEmpty) {
  auto usage = read_usage(private_dir());
  EXPECT_TRUE(usage.by_program.empty());
  EXPECT_FALSE(usage.zeroed_at.has_value());
  EXPECT_TRUE(usage.total().empty());
  EXPECT_TRUE(usage.unread.empty());
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
  EXPECT_TRUE(usage.unread.empty());
  ASSERT_EQ(usage.by_program.size(), 3u);
  const UsageCounts& wrapper = usage.by_program.at(std::string(kWrapperProgram));
  EXPECT_EQ(wrapper.hits, std::uint64_t{kProcesses * kRounds});
  EXPECT_DOUBLE_EQ(wrapper.saved_seconds, kProcesses * kRounds * 0.5);
  EXPECT_EQ(usage.by_program.at("program 0").misses, std::uint64_t{kProcesses / 2 * kRounds / 4});
  EXPECT_EQ(usage.by_program.at("program 1").misses, std::uint64_t{kProcesses / 2 * kRounds / 4});
  EXPECT_EQ(usage.total().misses, std::uint64_t{kProcesses * kRounds / 4});
  EXPECT_DOUBLE_EQ(usage.total().compile_seconds, kProcesses * kRounds / 4 * 2.0);
}

TEST_F(UsageStatsTest, ZeroEmptiesEveryCounterAndSaysWhen) {
  UsageCounts hit;
  hit.hits = 3;
  ASSERT_TRUE(record_usage(private_dir(), kLauncherProgram, hit));
  const auto when = util::WallTime(std::chrono::seconds(1'790'000'000));
  auto zeroed = zero_usage(private_dir(), when);
  EXPECT_TRUE(zeroed.left.empty());
  EXPECT_TRUE(zeroed.replaced.empty());
  auto usage = read_usage(private_dir());
  EXPECT_TRUE(usage.by_program.empty());
  ASSERT_TRUE(usage.zeroed_at.has_value());
  EXPECT_EQ(*usage.zeroed_at, when);
  ASSERT_TRUE(record_usage(private_dir(), kLauncherProgram, hit));
  usage = read_usage(private_dir());
  EXPECT_EQ(usage.total().hits, 3u);
  EXPECT_EQ(*usage.zeroed_at, when) << "counting on keeps when they were zeroed";
}

// A torn shard is named by the reader, counts nothing, and the next count
// in it rewrites it.
TEST_F(UsageStatsTest, AShardACrashCutShortIsTornAndRewrittenByTheNextCount) {
  UsageCounts miss;
  miss.misses = 1;
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, miss));
  ASSERT_TRUE(fs::exists(own_shard()));
  test::write_text(own_shard(), "{\"programs\": {\"neuron_cc_wr");
  auto torn = read_usage(private_dir());
  EXPECT_EQ(torn.total().misses, 0u);
  ASSERT_EQ(faults_of(torn), (std::vector<std::pair<fs::path, ShardFault>>{{own_shard(), ShardFault::torn}}));
  EXPECT_EQ(describe(torn.unread[0]), own_shard().string() + " is torn (not valid JSON (a write cut short, or not ours))");
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, miss));
  auto usage = read_usage(private_dir());
  EXPECT_TRUE(usage.unread.empty());
  EXPECT_EQ(usage.total().misses, 1u);
}

// A shard with a value no count of ours can reach (usage_shard.hpp) is torn:
// left out of the sums with the rest of it, and named with why.
TEST_F(UsageStatsTest, AShardWithValuesOutOfRangeIsTornAndNamed) {
  const std::vector<std::pair<std::string, std::string>> torn = {
      {R"({"programs":{"p":{"hits":-5}}})", "'p' has hits -5, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"misses":1e30}}})", "'p' has misses 1e+30, not a count from 0 to 2^53"},
      {R"({"programs":{"p":{"compile_seconds":9.3e18}}})",
       "'p' has compile_seconds 9.3e+18, not a number of seconds from 0 to 1e13"},
      {R"({"zeroed_unix":-2556057600})", "zeroed_unix -2556057600 is not a time from 1970 to 2100"},
  };
  for (const auto& [text, why] : torn) {
    test::write_text(shard(3), text);
    test::write_text(shard(4), hits_text(2));
    auto usage = read_usage(private_dir());
    EXPECT_EQ(usage.total().hits, 2u) << text << ": only the other shard counts";
    EXPECT_EQ(usage.total().misses, 0u) << text;
    EXPECT_EQ(usage.total().compile_seconds, 0) << text;
    EXPECT_FALSE(usage.zeroed_at.has_value()) << text;
    ASSERT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{shard(3), ShardFault::torn}})) << text;
    EXPECT_EQ(usage.unread[0].detail, why);
  }
}

// A sum stops at the largest count rather than wrap, and a count added to
// a shard at its largest keeps it readable.
TEST_F(UsageStatsTest, SumsStopAtTheLargestValueAndStayReadable) {
  const std::string big = std::to_string(kMaxUsageCount - 1);
  for (int i : {0, 1})
    test::write_text(shard(i), "{\"programs\":{\"p\":{\"hits\":" + big + ",\"saved_seconds\":9e12}}}");
  auto usage = read_usage(private_dir());
  EXPECT_TRUE(usage.unread.empty());
  EXPECT_EQ(usage.total().hits, kMaxUsageCount);
  EXPECT_EQ(usage.total().saved_seconds, kMaxUsageSeconds);
  UsageCounts more = hits(kMaxUsageCount);
  more.saved_seconds = kMaxUsageSeconds;
  ASSERT_TRUE(record_usage(private_dir(), "p", more));
  ASSERT_TRUE(record_usage(private_dir(), "p", more));
  usage = read_usage(private_dir());
  EXPECT_TRUE(usage.unread.empty()) << describe(usage.unread.front());
  EXPECT_EQ(usage.total().hits, kMaxUsageCount);
}

// A FIFO in the shard a count goes to first: passed over (never opened to
// read, never waited on), the count made in the next shard, the FIFO left
// as it is; the reader names it and sums the rest.
TEST_F(UsageStatsTest, AFifoInAShardsPlaceIsPassedOverNeverWaitedOn) {
  fs::create_directories(stats_dir());
  ASSERT_EQ(::mkfifo(own_shard().c_str(), 0600), 0);
  // The child counts in the shard of its own pid: a FIFO in every place.
  for (int i = 0; i < kStatsShards; ++i) {
    if (shard(i) == own_shard()) continue;
    ASSERT_EQ(::mkfifo(shard(i).c_str(), 0600), 0);
  }
  EXPECT_TRUE(in_child_that_cannot_hang([&] {
    return !record_usage(private_dir(), kWrapperProgram, hits(1)).ok() && read_usage(private_dir()).unread.size() == 16;
  })) << "with a FIFO in every place, nothing is counted, and nothing waits";
  for (int i = 0; i < kStatsShards; ++i)
    if (shard(i) != own_shard()) fs::remove(shard(i));
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, hits(1)));
  EXPECT_TRUE(fs::is_fifo(own_shard()));
  const fs::path next = shard(static_cast<int>((::getpid() + 1) % kStatsShards));
  EXPECT_EQ(parse_usage_shard(test::read_text(next))->by_program.at(std::string(kWrapperProgram)).hits, 1u);
  UsageStats usage;
  ASSERT_TRUE(in_child_that_cannot_hang([&] { return read_usage(private_dir()).total().hits == 1; }));
  usage = read_usage(private_dir());
  EXPECT_EQ(usage.total().hits, 1u);
  ASSERT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{own_shard(), ShardFault::not_a_file}}));
  EXPECT_EQ(describe(usage.unread[0]), own_shard().string() + " is a FIFO, not a file");
}

// Whatever is in a shard's place, the others are summed and each one that
// cannot be is named once, in the shards' order.
TEST_F(UsageStatsTest, EachShardThatCannotBeReadIsNamedAndTheRestSummed) {
  fs::create_directories(shard(0));                                    // a directory
  fs::create_symlink("/dev/zero", shard(1));                           // a link to a device
  test::write_text(shard(2), std::string("\x00\xff\x13garbage", 10)); // garbage
  {
    test::write_text(shard(3), "");
    std::error_code ec;
    fs::resize_file(shard(3), std::uintmax_t{1} << 30, ec); // a 1 GB shard (sparse: no disk)
    ASSERT_FALSE(ec) << ec.message();
  }
  fs::create_symlink(shard(5), shard(4));                              // a link to a good shard
  test::write_text(shard(5), hits_text(5));
  test::write_text(shard(6), hits_text(6));
  auto usage = read_usage(private_dir());
  EXPECT_EQ(usage.total().hits, 11u);
  EXPECT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{shard(0), ShardFault::not_a_file},
                                                                              {shard(1), ShardFault::not_a_file},
                                                                              {shard(2), ShardFault::torn},
                                                                              {shard(3), ShardFault::torn},
                                                                              {shard(4), ShardFault::not_a_file}}));
  ASSERT_EQ(usage.unread.size(), 5u);
  EXPECT_EQ(describe(usage.unread[0]), shard(0).string() + " is a directory, not a file");
  EXPECT_EQ(describe(usage.unread[1]), shard(1).string() + " is a symbolic link, not a file");
  EXPECT_EQ(describe(usage.unread[3]),
            shard(3).string() + " is torn (larger than a shard can be: 1073741824 bytes, at most 1048576)");
}

// The stats folder as a file: no shard can be there. The reader says so
// once, a count fails (uncounted, never an error of what counts), and a
// zero makes the folder again.
TEST_F(UsageStatsTest, AFileInTheFoldersPlaceIsNamedAndZeroMakesTheFolderAgain) {
  test::write_text(stats_dir(), "not a folder\n");
  auto usage = read_usage(private_dir());
  EXPECT_TRUE(usage.by_program.empty());
  ASSERT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{stats_dir(), ShardFault::no_folder}}));
  EXPECT_EQ(describe(usage.unread[0]), stats_dir().string() + " is a regular file, not a directory");
  auto counted = record_usage(private_dir(), kWrapperProgram, hits(1));
  ASSERT_FALSE(counted.ok());
  EXPECT_EQ(counted.error(), stats_dir().string() + " is a file, not a directory");

  auto zeroed = zero_usage(private_dir(), util::WallTime(std::chrono::seconds(1'790'000'000)));
  EXPECT_TRUE(zeroed.left.empty());
  ASSERT_EQ(zeroed.replaced.size(), 1u);
  EXPECT_EQ(describe(zeroed.replaced[0]), stats_dir().string() + " is a regular file, not a directory");
  EXPECT_TRUE(fs::is_directory(stats_dir()));
  EXPECT_EQ(test::names_in(stats_dir()).size(), std::size_t{kStatsShards});
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, hits(1)));
  usage = read_usage(private_dir());
  EXPECT_TRUE(usage.unread.empty());
  EXPECT_EQ(usage.total().hits, 1u);
}

// A zero removes what is not a shard and makes the shard again, but a
// directory with files in it, which it names, its counters as they were.
TEST_F(UsageStatsTest, ZeroReplacesWhatIsNotAShardButADirectoryWithFiles) {
  fs::create_directories(stats_dir());
  ASSERT_EQ(::mkfifo(shard(0).c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", shard(1));
  fs::create_directories(shard(2));
  test::write_text(shard(3) / "keep", "mine\n");
  test::write_text(shard(4), "garbage");
  test::write_text(shard(5), hits_text(5));
  ZeroReport zeroed;
  ASSERT_TRUE(in_child_that_cannot_hang([&] {
    auto z = zero_usage(private_dir(), util::WallTime(std::chrono::seconds(1'790'000'000)));
    return z.replaced.size() == 3 && z.left.size() == 1;
  }));
  zeroed = zero_usage(private_dir(), util::WallTime(std::chrono::seconds(1'790'000'000)));
  // The child replaced three already: this zero finds regular files there.
  EXPECT_TRUE(zeroed.replaced.empty());
  ASSERT_EQ(zeroed.left.size(), 1u);
  EXPECT_EQ(describe(zeroed.left[0]), shard(3).string() + " is a directory with files in it, not a file");
  EXPECT_EQ(test::read_text(shard(3) / "keep"), "mine\n");
  for (int i : {0, 1, 2, 4, 5}) EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(shard(i)))) << i;
  EXPECT_TRUE(fs::exists("/dev/zero") && fs::is_character_file("/dev/zero"));
  auto usage = read_usage(private_dir());
  EXPECT_EQ(usage.total().hits, 0u);
  ASSERT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{shard(3), ShardFault::not_a_file}}));
  ASSERT_TRUE(usage.zeroed_at.has_value());
}

// A shard another process holds (stopped while it counted, say): a count
// goes to another shard at once; the reader waits at most its lock wait and
// names it.
TEST_F(UsageStatsTest, AShardAnotherProcessHoldsIsPassedOverAndNamed) {
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, hits(1)));
  util::UniqueFd holder(::open(own_shard().c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(holder.valid());
  ASSERT_EQ(::flock(holder.get(), LOCK_EX), 0); // another open file: flock excludes it as another process
  ASSERT_TRUE(record_usage(private_dir(), kWrapperProgram, hits(1), std::chrono::milliseconds(0)));
  auto usage = read_usage(private_dir(), std::chrono::milliseconds(0));
  EXPECT_EQ(usage.total().hits, 1u) << "the held shard's hit is not read";
  ASSERT_EQ(faults_of(usage), (std::vector<std::pair<fs::path, ShardFault>>{{own_shard(), ShardFault::busy}}));
  EXPECT_EQ(describe(usage.unread[0]),
            own_shard().string() + " is locked by another process (waited 0.0s for the counters)");
  ASSERT_EQ(::flock(holder.get(), LOCK_UN), 0);
  usage = read_usage(private_dir());
  EXPECT_TRUE(usage.unread.empty());
  EXPECT_EQ(usage.total().hits, 2u);

  // Every shard held: nothing counted, every shard named, nothing waits past
  // the lock wait.
  std::vector<util::UniqueFd> holders;
  for (int i = 0; i < kStatsShards; ++i) {
    holders.emplace_back(::open(shard(i).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(holders.back().valid());
    ASSERT_EQ(::flock(holders.back().get(), LOCK_EX), 0);
  }
  auto counted = record_usage(private_dir(), kWrapperProgram, hits(1), std::chrono::milliseconds(0));
  ASSERT_FALSE(counted.ok());
  EXPECT_EQ(counted.error(), "every shard of the counters in " + stats_dir().string() +
                                 " was locked by another process for over 0.0s");
  usage = read_usage(private_dir(), std::chrono::milliseconds(0));
  ASSERT_EQ(usage.unread.size(), std::size_t{kStatsShards});
  for (const auto& u : usage.unread) EXPECT_EQ(u.fault, ShardFault::busy) << describe(u);
}

// A folder this user cannot write (a cache shared read-only): nothing is
// counted, the count says why, and the reader sums what it can read. Root
// writes anywhere: as root, the test runs as nobody (uid 65534).
constexpr uid_t kNobody = 65534;
TEST_F(UsageStatsTest, AFolderThisUserCannotWriteCountsNothing) {
  test::write_text(shard(5), hits_text(5));
  fs::permissions(stats_dir(), fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read |
                                   fs::perms::others_exec);
  fs::permissions(shard(5), fs::perms::owner_read | fs::perms::others_read);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(dir().c_str(), 0755), 0);
    for (const fs::path& p : {dir(), private_dir(), stats_dir(), shard(5)})
      ASSERT_EQ(::lchown(p.c_str(), kNobody, kNobody), 0) << p;
  }
  const bool as_nobody = ::geteuid() == 0;
  EXPECT_TRUE(in_child_that_cannot_hang([&] {
    if (as_nobody && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) return false;
    auto counted = record_usage(private_dir(), kWrapperProgram, hits(1));
    auto usage = read_usage(private_dir());
    return !counted.ok() && counted.error().find("opened to write: Permission denied") != std::string::npos &&
           usage.total().hits == 5 && usage.unread.empty();
  }));
  EXPECT_EQ(test::names_in(stats_dir()), std::vector<std::string>{"5.json"});
  fs::permissions(stats_dir(), fs::perms::owner_all);
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
