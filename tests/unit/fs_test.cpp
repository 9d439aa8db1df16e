// util/fs's readers: a file whole, whatever its size says (a /proc file says
// 0, a file may grow while it is read), a pipe, and the limit of read_fd.

#include <npc/util/fs.hpp>

#include <fcntl.h>
#include <set>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace npc::util {
namespace {

class ReadFileTest : public test::TempDirTest {};

TEST_F(ReadFileTest, ReadsSmallEmptyAndLargeFilesWhole) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                           std::size_t{70000}, std::size_t{3} << 20}) {
    std::string data(size, '\0');
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>('a' + i % 26);
    fs::path path = dir() / ("f" + std::to_string(size));
    ASSERT_TRUE(write_file_atomic(path, data));
    auto read = read_file(path);
    ASSERT_TRUE(read) << read.error();
    EXPECT_EQ(read->size(), size);
    EXPECT_EQ(*read, data);
  }
}

TEST_F(ReadFileTest, AProcFileWhoseSizeSaysZeroIsReadWhole) {
  auto maps = read_file("/proc/self/maps"); // st_size 0, several kB
  ASSERT_TRUE(maps) << maps.error();
  EXPECT_GT(maps->size(), 4096u);
  EXPECT_EQ(maps->back(), '\n');
}

TEST_F(ReadFileTest, ReadFdReadsFromTheStartWhereverTheOffsetIs) {
  fs::path path = dir() / "f";
  ASSERT_TRUE(write_file_atomic(path, "0123456789"));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char skip[4];
  ASSERT_EQ(::read(fd, skip, sizeof skip), 4);
  auto read = read_fd(fd, 100);
  ::close(fd);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(*read, "0123456789");
}

TEST_F(ReadFileTest, ReadFdFailsPastItsLimit) {
  fs::path path = dir() / "f";
  ASSERT_TRUE(write_file_atomic(path, std::string(5000, 'x')));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto read = read_fd(fd, 4999);
  ::close(fd);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "larger than 4999 bytes");
}

TEST_F(ReadFileTest, APipeIsReadToItsEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string data(200000, 'p'); // more than a pipe holds: the writer waits for the reader
  std::thread writer([&] {
    std::size_t at = 0;
    while (at < data.size()) {
      ssize_t n = ::write(fds[1], data.data() + at, data.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
  });
  auto read = read_fd(fds[0], 1 << 20);
  writer.join();
  ::close(fds[0]);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->size(), data.size());
  EXPECT_EQ(*read, data);
}

TEST_F(ReadFileTest, AMissingFileIsNamed) {
  auto read = read_file(dir() / "missing");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "cannot open " + (dir() / "missing").string() + ": No such file or directory");
}

TEST(UniqueSuffix, NamesDifferAndAreTheirDocumentedShape) {
  std::set<std::string> names;
  for (int i = 0; i < 2000; ++i) {
    std::string s = unique_suffix();
    auto dot = s.find('.');
    ASSERT_NE(dot, std::string::npos) << s;
    EXPECT_EQ(s.substr(0, dot), std::to_string(::getpid()));
    EXPECT_EQ(s.size() - dot - 1, 8u) << s;
    EXPECT_EQ(s.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz", dot + 1), std::string::npos) << s;
    names.insert(s);
  }
  EXPECT_EQ(names.size(), 2000u);
}

} // namespace
} // namespace npc::util
