#include <npc/util/input_file.hpp>

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npc::util {

namespace {

Status regular_or_refuse(const fs::path& path, const struct stat& st) {
  if (S_ISREG(st.st_mode)) return ok_status();
  return fail(path.string() + " is a " + std::string(file_type_name(st.st_mode)) + ", not a regular file");
}

} // namespace

std::string_view file_type_name(unsigned mode) {
  switch (mode & S_IFMT) {
  case S_IFREG: return "regular file";
  case S_IFDIR: return "directory";
  case S_IFCHR: return "character device";
  case S_IFBLK: return "block device";
  case S_IFIFO: return "FIFO";
  case S_IFSOCK: return "socket";
  case S_IFLNK: return "symbolic link";
  default: return "special file";
  }
}

Result<UniqueFd> open_input_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(errno_text("cannot open", path, errno));
  if (auto s = regular_or_refuse(path, st); !s) return fail(s.error());
  // O_NONBLOCK: a FIFO put in its place since the stat() must not block the
  // open; on a regular file it changes nothing.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  if (::fstat(fd.get(), &st) != 0) return fail(errno_text("cannot stat", path, errno));
  if (auto s = regular_or_refuse(path, st); !s) return fail(s.error());
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) std::ignore = ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Result<std::string> read_input_file(const fs::path& path) {
  auto fd = open_input_file(path);
  if (!fd) return fail(fd.error());
  std::string data;
  struct stat st {};
  if (::fstat(fd->get(), &st) == 0 && st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd->get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno_text("cannot read", path, errno));
    }
    if (n == 0) return data;
    data.append(buffer, static_cast<std::size_t>(n));
  }
}

} // namespace npc::util
