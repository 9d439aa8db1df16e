// Who may have made the cache we read: a private root by default, a group's
// shared root on request, a root that is a link you own followed, and
// foreign-owned roots and links, and symlinked entries, refused unless trusted.

#include <sys/stat.h>
#include <unistd.h>

#include "test_support.hpp"

namespace npc::test {
namespace {

class CacheTrust : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    graph_ = dir() / "g.hlo";
    write_text(graph_, "HloModule trust\n");
  }
  RunResult compile(std::map<std::string, std::string> env = {}) {
    return run_tool("neuron_cc_wrapper", {"compile", "--graph", graph_.string(), "--output", (dir() / "o.neff").string()},
                    std::move(env));
  }
  static unsigned mode_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  fs::path graph_;
};

TEST_F(CacheTrust, NewRootIsPrivate) {
  ASSERT_EQ(compile().exit_code, 0);
  EXPECT_EQ(mode_of(cache_root()), 0700u);
}

TEST_F(CacheTrust, SharedRootIsGroupWritableWithSetgid) {
  auto r = compile({{"NEURON_COMPILE_CACHE_SHARED", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(mode_of(cache_root()), 02770u);
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(mode_of(entries()[0]) & 0070, 0070u) << "group may write entries";
  EXPECT_EQ(mode_of(entries()[0] / "model.neff") & 0060, 0060u);
}

// A cache dir that is a link to an NVMe or FSx mount, as users make them:
// the same rule for every program and every spelling of the path.
TEST_F(CacheTrust, ASymlinkedRootThatYouOwnIsFollowed) {
  fs::create_directories(dir() / "elsewhere");
  fs::create_directory_symlink(dir() / "elsewhere", cache_root());
  auto r = compile();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(names_in(dir() / "elsewhere" / (std::string("neuronxcc-") + kStandinVersion)).size(), 1u);
  EXPECT_TRUE(fs::is_symlink(cache_root()));
  auto launcher = run_tool("neuron_parallel_compile", {"--parallel_compile_workdir", (dir() / "wd").string(),
                                                       "--command", "compile"});
  EXPECT_EQ(launcher.exit_code, 0) << launcher.describe();
  auto ls = run_tool("neuron_cache", {"ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.describe();
  auto hit = compile();
  EXPECT_EQ(hit.exit_code, 0) << hit.describe();
  EXPECT_EQ(compiles(), 1u);
}

TEST_F(CacheTrust, ASymlinkedRootOwnedByAnotherUserOrPointingToTheirsIsRefused) {
  ASSERT_EQ(::geteuid(), 0u) << "this test needs root (CAP_CHOWN) to give a link to another user: run the "
                                "e2e suite as root, e.g. in the CI container";
  fs::create_directories(dir() / "elsewhere");
  fs::create_directory_symlink(dir() / "elsewhere", cache_root());
  ASSERT_EQ(::lchown(cache_root().c_str(), 65534, 65534), 0);
  auto r = compile();
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_NE(r.err.find("the cache directory " + cache_root().string() +
                       " is a symlink owned by uid 65534, neither you (uid 0) nor root; refusing"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(dir() / "elsewhere"));
  EXPECT_EQ(compiles(), 0u);
  EXPECT_EQ(compile({{"NEURON_COMPILE_CACHE_TRUSTED", "1"}}).exit_code, 0);

  // Your own link to another user's directory: the directory decides.
  fs::create_directories(dir() / "theirs");
  ASSERT_EQ(::chown((dir() / "theirs").c_str(), 65534, 65534), 0);
  fs::remove(cache_root());
  fs::create_directory_symlink(dir() / "theirs", cache_root());
  auto theirs = compile();
  EXPECT_EQ(theirs.exit_code, 3) << theirs.describe();
  EXPECT_NE(theirs.err.find("is owned by uid 65534, not by you (uid 0); refusing"), std::string::npos) << theirs.err;
  EXPECT_TRUE(fs::is_empty(dir() / "theirs"));
}

TEST_F(CacheTrust, RootOwnedByAnotherUserIsRefusedUnlessShared) {
  // Giving the cache to another user needs root. Without it this test could
  // only skip, and a skipped test proves nothing: it fails instead, naming
  // what it needs.
  ASSERT_EQ(::geteuid(), 0u) << "this test needs root (CAP_CHOWN) to give the cache to another user: run the "
                                "e2e suite as root, e.g. in the CI container";
  fs::create_directories(cache_root());
  ASSERT_EQ(::chown(cache_root().c_str(), 65534, 65534), 0);
  auto r = compile();
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_NE(r.err.find("is owned by uid 65534, not by you (uid 0); refusing"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 0u);
  EXPECT_EQ(compile({{"NEURON_COMPILE_CACHE_SHARED", "1"}}).exit_code, 0);
}

TEST_F(CacheTrust, SymlinkedEntryIsNeverServed) {
  ASSERT_EQ(compile().exit_code, 0);
  fs::path entry = entries()[0];
  // Someone replaces the entry with a link to a directory of their own that
  // looks like a finished entry.
  fs::path fake = dir() / "fake";
  fs::copy(entry, fake);
  write_text(fake / "model.neff", "EVIL");
  fs::remove_all(entry);
  fs::create_directory_symlink(fake, entry);
  auto r = compile();
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("is a symlink; refusing"), std::string::npos) << r.err;
  EXPECT_NE(read_text(dir() / "o.neff"), "EVIL");
}

} // namespace
} // namespace npc::test
