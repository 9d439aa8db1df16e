// cache/summary: listings that recall settled entries from a summary, and
// look again at whatever changed.

#include <algorithm>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/summary.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"
#include "unit_helpers.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSummaryVersion = "1.0";

class SummaryTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root", clock);
    ASSERT_TRUE(cache->ensure_root().ok());
    // Entries written by the test are settled at once: file times are
    // coarse (a clock tick), so the test waits one out before listing.
    cache->set_summary_settle_time(0ns);
  }

  fs::path make_entry(char graph, char flags, bool done, std::string neff = "neff-bytes") {
    fs::path d = cache->entry_dir(unit::repeated_key(kSummaryVersion, graph, flags));
    fs::create_directories(d);
    test::write_text(d / kGraphFile, std::string("graph ") + graph);
    test::write_text(d / kFlagsFile, "[]");
    if (done) {
      test::write_text(d / kNeffFile, neff);
      test::write_text(d / kDoneFile, "");
    }
    return d;
  }

  static void let_file_times_pass() { std::this_thread::sleep_for(30ms); }

  fs::path summary_file() const {
    return dir() / "root" / kPrivateDir / kSummaryDir / (std::string(kVersionDirPrefix) + kSummaryVersion);
  }

  // The summary's records, one line each, without the header.
  std::vector<std::string> records() const {
    std::vector<std::string> lines;
    std::string text = test::read_text(summary_file());
    std::size_t start = text.find('\n');
    while (start != std::string::npos && start + 1 < text.size()) {
      std::size_t end = text.find('\n', start + 1);
      lines.push_back(text.substr(start + 1, end - start - 1));
      start = end;
    }
    return lines;
  }

  static const EntryInfo& by_dir(const std::vector<EntryInfo>& entries, const fs::path& d) {
    auto it = std::find_if(entries.begin(), entries.end(), [&](const EntryInfo& e) { return e.dir == d; });
    if (it == entries.end()) throw std::runtime_error("not listed: " + d.string());
    return *it;
  }

  static void expect_same(const EntryInfo& listed, const EntryInfo& inspected) {
    EXPECT_EQ(listed.key, inspected.key);
    EXPECT_EQ(listed.dir, inspected.dir);
    EXPECT_EQ(listed.state, inspected.state);
    EXPECT_EQ(listed.bytes, inspected.bytes);
    EXPECT_EQ(listed.last_used, inspected.last_used);
    EXPECT_EQ(listed.has_graph, inspected.has_graph);
    EXPECT_EQ(listed.has_flags, inspected.has_flags);
    EXPECT_EQ(listed.has_neff, inspected.has_neff);
    EXPECT_EQ(listed.has_done, inspected.has_done);
    EXPECT_EQ(listed.has_log, inspected.has_log);
    EXPECT_EQ(listed.graph_bytes, inspected.graph_bytes);
    EXPECT_EQ(listed.neff_bytes, inspected.neff_bytes);
    EXPECT_EQ(listed.dir_stamp, inspected.dir_stamp);
  }

  util::FakeClock clock{unit::at_unix(unit::kT0)};
  std::optional<Cache> cache;
};

TEST_F(SummaryTest, AListingRecordsSettledEntriesAndTheNextRecallsThem) {
  fs::path done = make_entry('a', '1', true);
  fs::path pending = make_entry('b', '2', false);
  fs::path failed = make_entry('c', '3', false);
  test::write_text(failed / kLogFile, "error: no");
  let_file_times_pass();

  auto first = cache->list();
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(records().size(), 3U);
  EXPECT_TRUE(test::read_text(summary_file()).starts_with("npc-cache-summary 1 3\n"));

  // A record that still holds is believed: a size changed in the summary
  // shows in the next listing, which proves it was not inspected.
  std::string text = test::read_text(summary_file());
  std::string module = done.filename().string();
  std::size_t line = text.find(module);
  ASSERT_NE(line, std::string::npos);
  std::size_t end = text.find('\n', line);
  std::string fields = text.substr(line, end - line); // module inode ctime files bytes graph_bytes
  std::size_t bytes_at = fields.rfind(' ', fields.rfind(' ') - 1) + 1;
  std::string edited = fields.substr(0, bytes_at) + "1000000" + fields.substr(fields.rfind(' '));
  text.replace(line, end - line, edited);
  test::write_text(summary_file(), text);

  auto second = cache->list();
  ASSERT_EQ(second.size(), 3U);
  EXPECT_EQ(by_dir(second, done).bytes, 1000000U + std::string("neff-bytes").size());
  for (const fs::path& d : {pending, failed}) expect_same(by_dir(second, d), *cache->entry(d).inspect());
  EXPECT_EQ(by_dir(second, done).state, EntryState::done);
  EXPECT_EQ(by_dir(second, pending).state, EntryState::pending);
  EXPECT_EQ(by_dir(second, failed).state, EntryState::failed);
}

TEST_F(SummaryTest, RecalledEntriesAreWhatInspectFinds) {
  std::vector<fs::path> dirs;
  for (char c = 'a'; c <= 'f'; ++c) dirs.push_back(make_entry(c, '1', c % 2 == 0, std::string(100 + c, 'n')));
  let_file_times_pass();
  std::ignore = cache->list(); // records them
  ASSERT_EQ(records().size(), dirs.size());
  auto listed = cache->list(); // recalls them
  ASSERT_EQ(listed.size(), dirs.size());
  for (const auto& d : dirs) expect_same(by_dir(listed, d), *cache->entry(d).inspect());
}

TEST_F(SummaryTest, AnEntryChangedSinceItsRecordIsInspectedAgain) {
  fs::path d = make_entry('a', '1', false);
  let_file_times_pass();
  std::ignore = cache->list();
  ASSERT_EQ(records().size(), 1U);
  // Compiled meanwhile: files created in the directory change its ctime.
  test::write_text(d / kNeffFile, "0123456789");
  test::write_text(d / kDoneFile, "");
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].state, EntryState::done);
  expect_same(listed[0], *cache->entry(d).inspect());
  // Removed and written again: a new directory, a new record.
  ASSERT_TRUE(util::remove_tree(d).ok());
  make_entry('a', '1', false);
  let_file_times_pass();
  listed = cache->list();
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].state, EntryState::pending);
  expect_same(listed[0], *cache->entry(d).inspect());
}

TEST_F(SummaryTest, TheNeffIsReadFreshOnEveryListing) {
  fs::path d = make_entry('a', '1', true, "small");
  let_file_times_pass();
  std::ignore = cache->list();
  ASSERT_EQ(records().size(), 1U);
  std::string before = test::read_text(summary_file());
  // The framework's read moves the NEFF's atime; a NEFF rewritten in place
  // changes its size: neither touches the directory.
  {
    int fd = ::open((d / kNeffFile).c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "a larger neff", 13), 13);
    ::close(fd);
  }
  std::time_t read_at = std::time(nullptr) + 86400; // later than anything the test wrote
  struct timespec times[2] = {{read_at, 0}, {0, UTIME_OMIT}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (d / kNeffFile).c_str(), times, 0), 0);
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].neff_bytes, 13U);
  EXPECT_EQ(listed[0].last_used, unit::at_unix(read_at));
  expect_same(listed[0], *cache->entry(d).inspect());
  EXPECT_EQ(test::read_text(summary_file()), before); // nothing to rewrite
}

TEST_F(SummaryTest, EntriesChangedWithinTheSettleTimeAreNotRecorded) {
  cache->set_summary_settle_time(kSummarySettleTime);
  make_entry('a', '1', true);
  EXPECT_EQ(cache->list().size(), 1U);
  EXPECT_FALSE(fs::exists(summary_file()));
}

TEST_F(SummaryTest, EntriesWithALockOrATempAreNotRecorded) {
  fs::path locked = make_entry('a', '1', false);
  fs::path with_temp = make_entry('b', '2', false);
  fs::path plain = make_entry('c', '3', true);
  auto lock = util::FileLock::try_acquire(locked / kLockFile, util::LockHolder::self("test"));
  ASSERT_TRUE(lock.ok() && lock->has_value());
  test::write_text(with_temp / ".tmp-model.neff.1.abcdefgh", "partial");
  let_file_times_pass();
  auto listed = cache->list();
  EXPECT_EQ(by_dir(listed, locked).state, EntryState::locked);
  ASSERT_EQ(records().size(), 1U);
  EXPECT_TRUE(records()[0].starts_with(plain.filename().string() + " "));
  // Released: the lock file goes, which is a change of the directory.
  lock->reset();
  let_file_times_pass();
  listed = cache->list();
  EXPECT_EQ(by_dir(listed, locked).state, EntryState::pending);
  EXPECT_EQ(records().size(), 2U);
}

TEST_F(SummaryTest, RemovedEntriesLeaveTheSummary) {
  fs::path a = make_entry('a', '1', true);
  make_entry('b', '2', true);
  let_file_times_pass();
  std::ignore = cache->list();
  ASSERT_EQ(records().size(), 2U);
  ASSERT_TRUE(util::remove_tree(a).ok());
  EXPECT_EQ(cache->list().size(), 1U);
  ASSERT_EQ(records().size(), 1U);
  EXPECT_FALSE(records()[0].starts_with(a.filename().string()));
}

TEST_F(SummaryTest, ABadSummaryIsIgnoredAndReplaced) {
  fs::path a = make_entry('a', '1', true);
  let_file_times_pass();
  std::ignore = cache->list();
  std::string good = test::read_text(summary_file());
  for (std::string bad : {std::string("garbage\n"), good.substr(0, good.size() - 5),
                          "npc-cache-summary 1 2\n" + good.substr(good.find('\n') + 1),
                          "npc-cache-summary 99 1\n" + good.substr(good.find('\n') + 1)}) {
    SCOPED_TRACE(bad);
    test::write_text(summary_file(), bad);
    auto listed = cache->list();
    ASSERT_EQ(listed.size(), 1U);
    expect_same(listed[0], *cache->entry(a).inspect());
    EXPECT_EQ(test::read_text(summary_file()), good);
  }
}

TEST_F(SummaryTest, TempsOfKilledListingsGoOnceStale) {
  make_entry('a', '1', true);
  let_file_times_pass();
  fs::create_directories(summary_file().parent_path());
  fs::path stale = summary_file().parent_path() / ".tmp-neuronxcc-1.0.999999.aaaaaaaa";
  fs::path fresh = summary_file().parent_path() / ".tmp-neuronxcc-1.0.999998.bbbbbbbb";
  test::write_text(stale, "npc-cache-summary 1 0\n");
  test::write_text(fresh, "npc-cache-summary 1 0\n");
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  std::ignore = cache->list(); // writes a summary
  EXPECT_EQ(records().size(), 1U);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh)); // perhaps a listing running now
}

TEST_F(SummaryTest, ASummaryLinkIsNotFollowed) {
  fs::path a = make_entry('a', '1', true);
  let_file_times_pass();
  std::ignore = cache->list();
  fs::path elsewhere = dir() / "elsewhere";
  fs::rename(summary_file(), elsewhere);
  std::string text = test::read_text(elsewhere);
  fs::create_symlink(elsewhere, summary_file());
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), 1U);
  expect_same(listed[0], *cache->entry(a).inspect());
  EXPECT_FALSE(fs::is_symlink(summary_file())); // replaced by a file
  EXPECT_EQ(test::read_text(elsewhere), text);
}

TEST_F(SummaryTest, LookingAgainTrustsOnlyAnOldEnoughUnchangedDirectory) {
  fs::path d = make_entry('a', '1', true, "12345");
  let_file_times_pass();
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), 1U);
  EntryInfo believed = listed[0];
  believed.bytes += 1000; // what only a listing that was not repeated would say
  // Unchanged and settled: two stats, the listing believed.
  auto again = look_again(cache->entry(d), believed, 0ns);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->bytes, believed.bytes);
  // Changed in the settle time: a directory made again may reuse the inode
  // and, within a clock tick, the ctime; so it is inspected.
  again = look_again(cache->entry(d), believed, kSummarySettleTime);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->bytes, listed[0].bytes);
  // Changed since: inspected, whatever its age.
  test::write_text(d / kLogFile, "log");
  again = look_again(cache->entry(d), believed, 0ns);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_TRUE(again->has_log);
  EXPECT_EQ(again->bytes, listed[0].bytes + 3);
}

TEST_F(SummaryTest, CensusCountsWhatTheListingFinds) {
  make_entry('a', '1', true, "12345");
  make_entry('b', '2', true, "123");
  make_entry('c', '3', false);
  fs::path failed = make_entry('d', '4', false);
  test::write_text(failed / kLogFile, "log");
  let_file_times_pass();
  for (int pass = 0; pass < 2; ++pass) { // inspected, then recalled
    SCOPED_TRACE(pass);
    auto listed = cache->list();
    CacheCensus census = cache->census();
    EXPECT_EQ(census.entries, 4U);
    EXPECT_EQ(census.in_state(EntryState::done), 2U);
    EXPECT_EQ(census.in_state(EntryState::pending), 1U);
    EXPECT_EQ(census.in_state(EntryState::failed), 1U);
    std::uint64_t bytes = 0;
    util::WallTime oldest = listed[0].last_used, newest = listed[0].last_used;
    for (const auto& e : listed) {
      bytes += e.bytes;
      oldest = std::min(oldest, e.last_used);
      newest = std::max(newest, e.last_used);
    }
    EXPECT_EQ(census.bytes, bytes);
    EXPECT_EQ(census.oldest_use, oldest);
    EXPECT_EQ(census.newest_use, newest);
  }
}

TEST_F(SummaryTest, ManyProcessesListingAtOnceAgree) {
  for (char c : std::string("0123456789abcdef")) make_entry(c, '1', c % 3 != 0);
  let_file_times_pass();
  // Every listing rewrites the summary (each sees a summary another
  // process wrote moments ago, or none); every one must see every entry,
  // and the summary left behind must be whole.
  std::vector<pid_t> children;
  for (int p = 0; p < 8; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < 20; ++i) {
        if (cache->list().size() != 16U) ::_exit(1);
        if (cache->census().entries != 16U) ::_exit(2);
        if (i % 4 == 0) std::ignore = ::unlink(summary_file().c_str()); // and start over
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  std::ignore = cache->list();
  EXPECT_EQ(records().size(), 16U);
  EXPECT_FALSE(std::any_of(fs::directory_iterator(summary_file().parent_path()), fs::directory_iterator(),
                           [](const fs::directory_entry& e) { return util::is_temp_name(e.path().filename().string()); }));
}

} // namespace
} // namespace npc::cache
