// util/output_file: user-named outputs land as shell redirection would put
// them: regular files by rename, symlinks followed, devices and FIFOs
// written through and never replaced.

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <npc/util/output_file.hpp>

#include "temp_dir.hpp"
#include "test_support.hpp"

namespace npc::util {
namespace {

using npc::test::read_text;
using npc::test::write_text;

class OutputFileTest : public npc::test::TempDirTest {};

bool is_a_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

// Reads a FIFO until its writer closes it, without ever blocking for good:
// opened non-blocking (so the writer's open() can proceed), polled with a
// deadline, so a writer that never comes fails the test instead of hanging it.
std::string read_fifo(int fd) {
  std::string data;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool seen_data = false;
  while (std::chrono::steady_clock::now() < deadline) {
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      data.append(buffer, static_cast<std::size_t>(n));
      seen_data = true;
    } else if (n == 0 && seen_data) {
      break; // the writer closed
    } else if (n == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10)); // no writer yet
    }
  }
  return data;
}

TEST_F(OutputFileTest, NewAndRegularFilesAreReplacedWhole) {
  fs::path out = dir() / "report.json";
  ASSERT_TRUE(write_output_file(out, "first").ok());
  EXPECT_EQ(read_text(out), "first");
  ASSERT_TRUE(write_output_file(out, "second").ok());
  EXPECT_EQ(read_text(out), "second");
  auto target = resolve_output(out);
  ASSERT_TRUE(target.ok()) << target.error();
  EXPECT_EQ(target->kind, OutputKind::replace);
  EXPECT_EQ(target->path, out);
}

// Until it is published an output has no name: a writer killed with -9
// midway (an export of gigabytes) leaves nothing beside the user's file.
TEST_F(OutputFileTest, AnOutputBeingWrittenHasNoNameInItsDirectory) {
  fs::path out = dir() / "bundle.tar.zst";
  write_text(out, "old");
  OutputFile file(out);
  ASSERT_TRUE(file.open().ok());
  ASSERT_TRUE(file.write(std::string(1 << 20, 'x')).ok());
  EXPECT_EQ(npc::test::names_in(dir()), std::vector<std::string>{"bundle.tar.zst"});
  EXPECT_EQ(read_text(out), "old");
  ASSERT_TRUE(file.commit().ok());
  EXPECT_EQ(npc::test::names_in(dir()), std::vector<std::string>{"bundle.tar.zst"});
  EXPECT_EQ(read_text(out).size(), std::size_t{1} << 20);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1u);
}

TEST_F(OutputFileTest, AHiddenFileNotOverwritingLosesToAnExistingName) {
  fs::path out = dir() / "first";
  write_text(out, "first writer");
  AtomicFile file(out, 0644, TempName::hidden);
  ASSERT_TRUE(file.open().ok());
  ASSERT_TRUE(file.write("second writer").ok());
  EXPECT_FALSE(file.commit(Overwrite::no).ok());
  EXPECT_EQ(read_text(out), "first writer");
  EXPECT_EQ(npc::test::names_in(dir()), std::vector<std::string>{"first"});
}

TEST_F(OutputFileTest, ASymlinkIsFollowedAndItsTargetReplaced) {
  fs::create_directories(dir() / "elsewhere");
  write_text(dir() / "elsewhere" / "real.json", "old");
  fs::create_symlink("elsewhere/real.json", dir() / "link.json");
  ASSERT_TRUE(write_output_file(dir() / "link.json", "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir() / "link.json"));
  EXPECT_EQ(read_text(dir() / "elsewhere" / "real.json"), "new");
  // No temp file left beside the link or the target.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir() / "elsewhere"), fs::directory_iterator()), 1);
}

TEST_F(OutputFileTest, ADanglingSymlinkGetsItsTargetCreated) {
  fs::create_symlink(dir() / "made.json", dir() / "link.json");
  ASSERT_TRUE(write_output_file(dir() / "link.json", "x").ok());
  EXPECT_TRUE(fs::is_symlink(dir() / "link.json"));
  EXPECT_EQ(read_text(dir() / "made.json"), "x");
}

TEST_F(OutputFileTest, AFullDeviceIsAnErrorNamingThePath) {
  // Through a symlink of ours: the device itself is never at risk here.
  fs::create_symlink("/dev/full", dir() / "full");
  auto s = write_output_file(dir() / "full", "data");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cannot write " + (dir() / "full").string() + ": No space left on device");
  EXPECT_TRUE(fs::is_symlink(dir() / "full"));
  auto target = resolve_output(dir() / "full");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->kind, OutputKind::write_through);
}

TEST_F(OutputFileTest, AFifoIsWrittenThroughNotReplaced) {
  fs::path fifo = dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::string received;
  std::thread read_side([&] { received = read_fifo(reader); });
  auto s = write_output_file(fifo, "through the pipe");
  read_side.join();
  ::close(reader);
  EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(is_a_fifo(fifo)) << "the FIFO was replaced";
}

TEST_F(OutputFileTest, ProcLinksAreWrittenThrough) {
  auto target = resolve_output("/dev/stdout");
  ASSERT_TRUE(target.ok()) << target.error();
  EXPECT_EQ(target->kind, OutputKind::write_through);
  EXPECT_EQ(target->path, fs::path("/dev/stdout"));
}

TEST_F(OutputFileTest, ADirectoryIsRefused) {
  auto s = write_output_file(dir(), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cannot write " + dir().string() + ": Is a directory");
  auto check = check_output_writable(dir());
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.error(), "cannot write " + dir().string() + ": Is a directory");
}

TEST_F(OutputFileTest, AMissingDirectoryIsSaidOfThePathGiven) {
  fs::path out = dir() / "missing" / "r.json";
  auto check = check_output_writable(out);
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.error(), "cannot write " + out.string() + ": No such file or directory");
  auto s = write_output_file(out, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cannot write " + out.string() + ": No such file or directory");
}

TEST_F(OutputFileTest, TheWritabilityCheckLeavesNothingBehind) {
  EXPECT_TRUE(check_output_writable(dir() / "r.json").ok());
  EXPECT_TRUE(check_directory_writable(dir()).ok());
  EXPECT_TRUE(fs::is_empty(dir()));
  auto s = check_directory_writable(dir() / "missing");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cannot create files in " + (dir() / "missing").string() + ": No such file or directory");
}

TEST_F(OutputFileTest, PublishingAFinishedFileRenamesOrCopiesThrough) {
  write_text(dir() / "made", "neff bytes");
  ASSERT_TRUE(publish_output_from(dir() / "made", dir() / "out.neff").ok());
  EXPECT_EQ(read_text(dir() / "out.neff"), "neff bytes");
  EXPECT_FALSE(fs::exists(dir() / "made"));

  write_text(dir() / "made", "neff bytes");
  fs::create_symlink("/dev/full", dir() / "full");
  auto s = publish_output_from(dir() / "made", dir() / "full");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cannot write " + (dir() / "full").string() + ": No space left on device");
  EXPECT_TRUE(fs::is_symlink(dir() / "full"));
}

TEST_F(OutputFileTest, StagingForADeviceIsNotBesideIt) {
  EXPECT_EQ(staging_dir_for_output(dir() / "out.neff"), dir());
  EXPECT_NE(staging_dir_for_output("/dev/null"), fs::path("/dev"));
}

} // namespace
} // namespace npc::util
