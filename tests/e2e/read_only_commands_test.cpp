// Commands that only look at the cache never count as a use of an entry:
// last use (the NEFF's atime, which the framework's reads move, and the mark
// our hits set on the entry) decides what LRU eviction removes, so a verify
// or an export must leave both as they were. The test file system is mounted
// relatime, where a read of a file whose atime is older than its mtime moves
// the atime: without O_NOATIME each command below would.

#include <fcntl.h>
#include <sys/stat.h>

#include "test_support.hpp"

namespace npc::test {
namespace {

// Ten days ago: older than the NEFF's mtime, so relatime would move it.
constexpr time_t kLongAgo = 10 * 24 * 3600;

struct Times {
  timespec neff_atime{};
  timespec entry_mtime{};
  bool operator==(const Times& o) const {
    return neff_atime.tv_sec == o.neff_atime.tv_sec && neff_atime.tv_nsec == o.neff_atime.tv_nsec &&
           entry_mtime.tv_sec == o.entry_mtime.tv_sec && entry_mtime.tv_nsec == o.entry_mtime.tv_nsec;
  }
};

class ReadOnlyCommands : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    if (HasFatalFailure()) return;
    for (const char* name : {"a", "b"}) {
      fs::path graph = dir() / "graphs" / (std::string(name) + ".hlo");
      write_text(graph, std::string("HloModule read_only_") + name + "\n");
      auto r = run_tool("neuron_cc_wrapper", {"compile", "--graph", graph.string(), "--output",
                                              (dir() / (std::string(name) + ".neff")).string()});
      ASSERT_EQ(r.exit_code, 0) << r.describe();
    }
    ASSERT_EQ(entries().size(), 2u);
    const timespec long_ago{::time(nullptr) - kLongAgo, 0};
    for (const auto& e : entries()) {
      const timespec neff_times[2] = {long_ago, {0, UTIME_OMIT}};
      ASSERT_EQ(::utimensat(AT_FDCWD, (e / "model.neff").c_str(), neff_times, 0), 0);
      const timespec entry_times[2] = {{0, UTIME_OMIT}, long_ago};
      ASSERT_EQ(::utimensat(AT_FDCWD, e.c_str(), entry_times, 0), 0);
    }
    before = times();
  }
  std::vector<Times> times() const {
    std::vector<Times> all;
    for (const auto& e : entries()) {
      struct stat neff {}, entry {};
      EXPECT_EQ(::stat((e / "model.neff").c_str(), &neff), 0);
      EXPECT_EQ(::stat(e.c_str(), &entry), 0);
      all.push_back({neff.st_atim, entry.st_mtim});
    }
    return all;
  }
  void expect_no_use_after(const std::vector<std::string>& args, const std::string& program = "neuron_cache") {
    auto r = run_tool(program, args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(times() == before) << program << " " << args.front() << " moved an entry's last use";
  }
  std::vector<Times> before;
};

TEST_F(ReadOnlyCommands, LsAndStats) {
  expect_no_use_after({"ls"});
  expect_no_use_after({"ls", "--json"});
  expect_no_use_after({"stats"});
}

TEST_F(ReadOnlyCommands, Verify) {
  expect_no_use_after({"verify"});
  expect_no_use_after({"verify", "--json"});
}

TEST_F(ReadOnlyCommands, Export) { expect_no_use_after({"export", "--all", "-o", (dir() / "all.tar.zst").string()}); }

TEST_F(ReadOnlyCommands, ExplainAndAPruneDryRun) {
  expect_no_use_after({"explain", entries()[0].string()});
  expect_no_use_after({"prune", "--dry-run", "--max-size", "1"});
}

TEST_F(ReadOnlyCommands, TheLaunchersScan) {
  expect_no_use_after({"--parallel_compile_workdir", (dir() / "wd").string(), "--command", "scan"},
                      "neuron_parallel_compile");
}

} // namespace
} // namespace npc::test

namespace npc::test {
namespace {

// A cache that is not there is said to be missing, not shown as empty.
TEST_F(CacheTest, NeuronCacheSaysACacheThatDoesNotExistIsMissing) {
  fs::path nowhere = dir() / "nowhere";
  for (const char* command : {"stats", "ls"}) {
    auto r = run_tool("neuron_cache", {command, "--cache_dir", nowhere.string()});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.err, "neuron_cache: warning: the cache " + nowhere.string() +
                         " does not exist: nothing in it (name the cache with --cache_dir in NEURON_CC_FLAGS, "
                         "NEURON_COMPILE_CACHE_URL or --cache_dir)\n")
        << command;
    EXPECT_FALSE(fs::exists(nowhere)) << command;
  }
}

} // namespace
} // namespace npc::test
