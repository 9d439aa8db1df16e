#include "files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.h"

namespace standin {

std::string errno_text() { return std::strerror(errno); }

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

bool read_all(int fd, std::string& out) {
  static constexpr std::size_t kChunkBytes = std::size_t{64} * 1024;
  char buffer[kChunkBytes];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got == 0) return true;
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out.append(buffer, static_cast<std::size_t>(got));
  }
}

std::string read_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw failure("cannot read " + what + " '" + path + "': " + errno_text());
  std::string contents;
  const bool ok = read_all(fd, contents);
  const std::string reason = ok ? "" : errno_text();
  ::close(fd);
  if (!ok) throw failure("cannot read " + what + " '" + path + "': " + reason);
  return contents;
}

}  // namespace standin
