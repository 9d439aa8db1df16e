// The local directory backend of the Storage interface: each operation's
// contract, and the two that many processes race on (create-only writes of bytes and
// of a local file) with many processes at once.

#include <algorithm>
#include <cerrno>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include <npc/storage/local.hpp>
#include <npc/util/fs.hpp>
#include <test_support.hpp>

namespace npc::storage {
namespace {

namespace fs = std::filesystem;

class LocalStorageTest : public test::TempDirTest {
protected:
  fs::path root() const { return dir() / "root"; }
  fs::path trash() const { return dir() / "root" / ".npc" / "trash"; }
  LocalStorage storage() const { return LocalStorage(root(), trash()); }
};

// Runs `body(i)` in `n` child processes started together; returns each
// child's exit code (0..255), or -1 for one that did not exit normally.
template <typename Body> std::vector<int> in_processes(int n, Body body) {
  int gate[2];
  if (::pipe(gate) != 0) return {};
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      std::ignore = ::read(gate[0], &c, 1); // all start when the gate closes
      ::_exit(body(i));
    }
    pids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

TEST_F(LocalStorageTest, WriteReadStatAndListGoUnderTheRoot) {
  auto s = storage();
  ASSERT_TRUE(s.write("v1/MODULE_a+b/model.neff", "neff bytes", storage::IfPresent::replace));
  EXPECT_EQ(test::read_text(root() / "v1" / "MODULE_a+b" / "model.neff"), "neff bytes");
  auto bytes = s.read("v1/MODULE_a+b/model.neff", 1 << 20);
  ASSERT_TRUE(bytes) << bytes.error();
  EXPECT_EQ(*bytes, "neff bytes");
  auto info = s.stat("v1/MODULE_a+b/model.neff");
  ASSERT_TRUE(info && info->has_value());
  EXPECT_EQ((*info)->size, 10u);
  EXPECT_FALSE((*info)->directory);
  auto folder = s.stat("v1/MODULE_a+b");
  ASSERT_TRUE(folder && folder->has_value());
  EXPECT_TRUE((*folder)->directory);
  auto names = s.list("v1");
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, std::vector<std::string>{"MODULE_a+b"});
  EXPECT_EQ(s.describe("v1/x"), (root() / "v1" / "x").string());
}

TEST_F(LocalStorageTest, AbsentThingsAreEmptyNotErrors) {
  auto s = storage();
  auto names = s.list("nothing/here");
  ASSERT_TRUE(names) << names.error();
  EXPECT_TRUE(names->empty());
  auto info = s.stat("nothing/here");
  ASSERT_TRUE(info) << info.error();
  EXPECT_FALSE(info->has_value());
  EXPECT_TRUE(s.remove("nothing/here"));
  auto removed = s.remove_tree("nothing");
  ASSERT_TRUE(removed);
  EXPECT_FALSE(*removed);
  auto read = s.read("nothing/here", 100);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "cannot read " + (root() / "nothing" / "here").string() + ": no such file");
  std::string bytes = "untouched";
  auto into_memory = s.read("nothing/here", storage::Into::memory(bytes, 100));
  ASSERT_TRUE(into_memory) << into_memory.error();
  EXPECT_FALSE(*into_memory);
  EXPECT_EQ(bytes, "untouched");
  auto into_file = s.read("nothing/here", storage::Into::file(dir() / "copy"));
  ASSERT_TRUE(into_file) << into_file.error();
  EXPECT_FALSE(*into_file);
  EXPECT_FALSE(fs::exists(dir() / "copy"));
}

// A root named with a trailing '/' describes its keys as a path joins them.
TEST_F(LocalStorageTest, ARootWithATrailingSlashDescribesItsKeysWithOneSlash) {
  storage::LocalStorage s(root().string() + "/", dir() / "trash");
  EXPECT_EQ(s.describe(), root().string() + "/");
  EXPECT_EQ(s.describe("v1/x"), (root() / "v1" / "x").string());
  EXPECT_TRUE(s.exclusive_create_is_exact());
}

TEST_F(LocalStorageTest, ReadRefusesMoreThanAskedAndWhatIsNotAFile) {
  auto s = storage();
  ASSERT_TRUE(s.write("big", std::string(100, 'x'), storage::IfPresent::replace));
  EXPECT_FALSE(s.read("big", 10));
  ASSERT_EQ(::mkfifo((root() / "fifo").c_str(), 0600), 0);
  auto fifo = s.read("fifo", 100); // would block without O_NONBLOCK
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().find("not a regular file"), std::string::npos) << fifo.error();
}

TEST_F(LocalStorageTest, CreateExclusiveKeepsTheFirstContent) {
  auto s = storage();
  auto first = s.write("e/graph", "one", storage::IfPresent::keep);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(*first);
  auto second = s.write("e/graph", "two", storage::IfPresent::keep);
  ASSERT_TRUE(second) << second.error();
  EXPECT_FALSE(*second);
  EXPECT_EQ(test::read_text(root() / "e" / "graph"), "one");
}

TEST_F(LocalStorageTest, OfSixteenProcessesCreatingOneKeyExactlyOneWins) {
  auto s = storage();
  auto codes = in_processes(16, [&](int i) {
    auto made = s.write("v/MODULE_x+y/model.hlo_module.pb", "writer " + std::to_string(i), storage::IfPresent::keep);
    if (!made) return 2;
    return *made ? 10 + i : 0;
  });
  ASSERT_EQ(codes.size(), 16u);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 2), 0);
  std::vector<int> winners;
  for (int c : codes)
    if (c >= 10) winners.push_back(c - 10);
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_EQ(test::read_text(root() / "v" / "MODULE_x+y" / "model.hlo_module.pb"),
            "writer " + std::to_string(winners[0]));
  // No temporary file is left by the losers.
  auto names = s.list("v/MODULE_x+y");
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, std::vector<std::string>{"model.hlo_module.pb"});
}

TEST_F(LocalStorageTest, OfSixteenProcessesPlacingOneFileExactlyOneWinsAndNoLocalFileIsLeft) {
  auto s = storage();
  fs::create_directories(dir() / "incoming");
  for (int i = 0; i < 16; ++i) test::write_text(dir() / "incoming" / std::to_string(i), "copy " + std::to_string(i));
  auto codes = in_processes(16, [&](int i) {
    auto placed =
        s.write("e/model.neff", storage::Body::file(dir() / "incoming" / std::to_string(i)), storage::IfPresent::keep);
    if (!placed) return 2;
    return *placed ? 10 + i : 0;
  });
  ASSERT_EQ(codes.size(), 16u);
  std::vector<int> winners;
  for (int c : codes)
    if (c >= 10) winners.push_back(c - 10);
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 0), 15);
  EXPECT_EQ(test::read_text(root() / "e" / "model.neff"), "copy " + std::to_string(winners[0]));
  EXPECT_TRUE(fs::is_empty(dir() / "incoming"));
}

TEST_F(LocalStorageTest, PutFileReplacesAndConsumesTheLocalFile) {
  auto s = storage();
  ASSERT_TRUE(s.write("e/model.log", "old", storage::IfPresent::replace));
  test::write_text(dir() / "log", "new");
  ASSERT_TRUE(s.write("e/model.log", storage::Body::file(dir() / "log"), storage::IfPresent::replace));
  EXPECT_EQ(test::read_text(root() / "e" / "model.log"), "new");
  EXPECT_FALSE(fs::exists(dir() / "log"));
}

TEST_F(LocalStorageTest, RemoveTreeGoesThroughTheTrashAndLeavesNothing) {
  auto s = storage();
  ASSERT_TRUE(s.write("v/MODULE_a+b/model.neff", "x", storage::IfPresent::replace));
  ASSERT_TRUE(s.write("v/MODULE_a+b/model.done", "", storage::IfPresent::replace));
  auto removed = s.remove_tree("v/MODULE_a+b");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(root() / "v" / "MODULE_a+b"));
  ASSERT_TRUE(fs::is_directory(trash()));
  EXPECT_TRUE(fs::is_empty(trash()));
}

TEST_F(LocalStorageTest, RemoveTreeRemovesNestedFoldersAndNeverFollowsALink) {
  // Outside the tree: a folder and a file that links in the tree name.
  fs::create_directories(dir() / "outside" / "deep");
  test::write_text(dir() / "outside" / "deep" / "keep", "x");
  test::write_text(dir() / "outside-file", "y");
  fs::path tree = dir() / "tree";
  fs::create_directories(tree / "a" / "b" / "c");
  test::write_text(tree / "a" / "b" / "c" / "f", "1");
  test::write_text(tree / "a" / "g", "2");
  fs::create_directory_symlink(dir() / "outside", tree / "a" / "to-dir");
  fs::create_symlink(dir() / "outside-file", tree / "to-file");
  ASSERT_TRUE(util::remove_tree(tree).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(test::read_text(dir() / "outside" / "deep" / "keep"), "x");
  EXPECT_EQ(test::read_text(dir() / "outside-file"), "y");
  // A link given as the path goes as itself; a file too; a missing path is fine.
  fs::create_directory_symlink(dir() / "outside", dir() / "link");
  ASSERT_TRUE(util::remove_tree(dir() / "link").ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir() / "link")));
  EXPECT_TRUE(fs::exists(dir() / "outside" / "deep" / "keep"));
  ASSERT_TRUE(util::remove_tree(dir() / "outside-file").ok());
  EXPECT_FALSE(fs::exists(dir() / "outside-file"));
  EXPECT_TRUE(util::remove_tree(dir() / "missing").ok());
}

TEST_F(LocalStorageTest, RemoveTreeMakesTheTrashWhenItIsMissing) {
  auto s = storage();
  ASSERT_TRUE(s.write("v/MODULE_a+b/model.neff", "x", storage::IfPresent::replace));
  ASSERT_FALSE(fs::exists(trash()));
  auto removed = s.remove_tree("v/MODULE_a+b");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(root() / "v" / "MODULE_a+b"));
  EXPECT_TRUE(fs::is_directory(trash()));
  EXPECT_TRUE(fs::is_empty(trash()));
  // Gone already: nothing removed, no error, with the trash there or not.
  removed = s.remove_tree("v/MODULE_a+b");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_FALSE(*removed);
  fs::remove(trash());
  removed = s.remove_tree("v/MODULE_a+b");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_FALSE(*removed);
}

TEST_F(LocalStorageTest, OfEightProcessesRemovingOneFolderOneRemovesItAndNoneFails) {
  auto s = storage();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(s.write("v/MODULE_a+b/file" + std::to_string(i), "x", storage::IfPresent::replace));
  auto codes = in_processes(8, [&](int) {
    auto removed = s.remove_tree("v/MODULE_a+b");
    if (!removed) return 2;
    return *removed ? 1 : 0;
  });
  ASSERT_EQ(codes.size(), 8u);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 1), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), 0), 7);
  EXPECT_FALSE(fs::exists(root() / "v" / "MODULE_a+b"));
}

TEST_F(LocalStorageTest, AFolderTimeIsTheFoldersOwn) {
  auto s = storage();
  ASSERT_TRUE(s.write("v/e/model.neff", "x", storage::IfPresent::replace));
  Time when = std::chrono::system_clock::from_time_t(1700000000);
  ASSERT_TRUE(s.set_folder_time("v/e", when));
  auto used = s.stat("v/e");
  ASSERT_TRUE(used) << used.error();
  ASSERT_TRUE(used->has_value());
  EXPECT_TRUE((*used)->directory);
  EXPECT_EQ(std::chrono::system_clock::to_time_t((*used)->modified), 1700000000);
  auto listed = s.list_tree("v/e");
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u) << "no record: the time is the folder's";
  EXPECT_EQ((*listed)[0].key, "model.neff");
  EXPECT_FALSE((*listed)[0].folder_time);
}

} // namespace
} // namespace npc::storage
