#include "locked_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "error.h"
#include "files.h"

namespace standin::cc {

LockedFile::LockedFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
  static constexpr mode_t kFileMode = 0644;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kFileMode);
  if (fd_ < 0) throw failure("cannot open " + what + " '" + path + "': " + errno_text());
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string reason = errno_text();
    ::close(fd_);
    throw failure("cannot lock " + what + " '" + path + "': " + reason);
  }
}

LockedFile::~LockedFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string LockedFile::read_all() {
  std::string contents;
  if (lseek(fd_, 0, SEEK_SET) < 0 || !standin::read_all(fd_, contents)) {
    throw failure("cannot read " + what_ + " '" + path_ + "': " + errno_text());
  }
  return contents;
}

void LockedFile::replace(const std::string& contents) {
  if (ftruncate(fd_, 0) != 0 || lseek(fd_, 0, SEEK_SET) < 0 || !write_all(fd_, contents)) {
    throw failure("cannot write " + what_ + " '" + path_ + "': " + errno_text());
  }
}

}  // namespace standin::cc
