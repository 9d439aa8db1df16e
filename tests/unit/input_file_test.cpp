// util/input_file: user-named inputs are regular files; a device or a FIFO
// is refused at once, never read forever or waited on.

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <npc/util/input_file.hpp>

#include "temp_dir.hpp"
#include "test_support.hpp"

namespace npc::util {
namespace {

class InputFileTest : public npc::test::TempDirTest {};

TEST_F(InputFileTest, ARegularFileIsRead) {
  npc::test::write_text(dir() / "g.hlo", "HloModule x\n");
  auto text = read_input_file(dir() / "g.hlo");
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(*text, "HloModule x\n");
}

TEST_F(InputFileTest, ASymlinkToARegularFileIsFollowed) {
  npc::test::write_text(dir() / "g.hlo", "HloModule x\n");
  fs::create_symlink("g.hlo", dir() / "link.hlo");
  auto text = read_input_file(dir() / "link.hlo");
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(*text, "HloModule x\n");
}

TEST_F(InputFileTest, ACharacterDeviceIsRefused) {
  auto fd = open_input_file("/dev/zero");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error(), "/dev/zero is a character device, not a regular file");
}

TEST_F(InputFileTest, AFifoWithoutAWriterIsRefusedWithoutBlocking) {
  // Were it opened, this test would block forever: the suite's timeout
  // would end it, failed.
  fs::path fifo = dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto text = read_input_file(fifo);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error(), fifo.string() + " is a FIFO, not a regular file");
}

TEST_F(InputFileTest, ASymlinkToADeviceIsRefusedAsTheDevice) {
  fs::create_symlink("/dev/zero", dir() / "zero.hlo");
  auto fd = open_input_file(dir() / "zero.hlo");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error(), (dir() / "zero.hlo").string() + " is a character device, not a regular file");
}

TEST_F(InputFileTest, ADirectoryIsRefused) {
  auto fd = open_input_file(dir());
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error(), dir().string() + " is a directory, not a regular file");
}

TEST_F(InputFileTest, AMissingFileSaysSo) {
  auto fd = open_input_file(dir() / "nope");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error(), "cannot open " + (dir() / "nope").string() + ": No such file or directory");
}

} // namespace
} // namespace npc::util
