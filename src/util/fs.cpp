#include <npc/util/fs.hpp>
#include <npc/util/random.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

namespace npc::util {

std::string errno_text(std::string_view what, const fs::path& path, int err) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(err);
}

bool is_temp_name(std::string_view filename) { return filename.starts_with(kTempPrefix); }

namespace {

// Reads straight into the string, sized once from fstat for a regular file
// (a cache summary of 100,000 entries is 8 MB, and growing a string by
// doubling touches twice the pages). No buffer on the stack: a cache hit
// reads its graph, and each page of a 64 KB buffer it touched was one more
// page fault. Fails past max_bytes; a read error names path when given.
Result<std::string> read_all(int fd, std::uint64_t max_bytes, const fs::path* path) {
  std::size_t expected = 0;
  if (struct stat st {}; ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
                         static_cast<std::uint64_t>(st.st_size) <= max_bytes)
    expected = static_cast<std::size_t>(st.st_size);
  std::string data;
  // One byte past a regular file's size, so that its end is seen by a
  // short read rather than by a second call.
  data.resize(expected > 0 ? expected + 1 : 4096);
  std::size_t used = 0;
  bool seekable = true; // a pipe is read from where it stands
  for (;;) {
    if (used == data.size()) data.resize(data.size() * 2);
    ssize_t n = seekable ? ::pread(fd, data.data() + used, data.size() - used, static_cast<off_t>(used))
                         : ::read(fd, data.data() + used, data.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ESPIPE && seekable) {
        seekable = false;
        continue;
      }
      if (path) return fail(errno_text("cannot read", *path, errno));
      return fail(std::string("read failed: ") + std::strerror(errno));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
    if (used > max_bytes) return fail("larger than " + std::to_string(max_bytes) + " bytes");
  }
  data.resize(used);
  return data;
}

} // namespace

int open_for_reading(const fs::path& path, int flags) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME | flags);
  // EPERM: neither the owner nor CAP_FOWNER (a cache shared by a group).
  if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  return fd;
}

Result<std::string> read_file(const fs::path& path) {
  UniqueFd fd(open_for_reading(path));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  return read_all(fd.get(), std::numeric_limits<std::uint64_t>::max(), &path);
}

Result<std::string> read_fd(int fd, std::uint64_t max_bytes) { return read_all(fd, max_bytes, nullptr); }

static std::string random_suffix() {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::uint64_t bits = random_u64(); // 8 digits of 36 use 41 of its bits
  std::string s(8, '0');
  for (auto& c : s) {
    c = kDigits[bits % 36];
    bits /= 36;
  }
  return s;
}

std::string unique_suffix() { return std::to_string(::getpid()) + "." + random_suffix(); }

AtomicFile::AtomicFile(fs::path final_path, unsigned mode, TempName temp_name)
    : final_path_(std::move(final_path)), mode_(mode), temp_name_(temp_name) {
  temp_path_ = final_path_.parent_path() /
               (std::string(kTempPrefix) + final_path_.filename().string() + "." +
                unique_suffix());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !hidden_ && !temp_path_.empty()) std::ignore = ::unlink(temp_path_.c_str());
}

Status AtomicFile::open() {
  // An unnamed file is given its name through /proc/self/fd at commit;
  // without /proc (a bare chroot) it could not be, so it is not made.
  if (temp_name_ == TempName::hidden && ::access("/proc/self/fd", X_OK) == 0) {
    fs::path dir = final_path_.has_parent_path() ? final_path_.parent_path() : fs::path(".");
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode_);
    if (fd_ >= 0) {
      hidden_ = true;
      return ok_status();
    }
    // EOPNOTSUPP and the like: a filesystem without unnamed files.
  }
  // Watched before it exists: a signal between its creation and the
  // watch would leave it behind.
  cleanup_ = TempCleanup(temp_path_);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_);
  if (fd_ < 0) {
    int err = errno;
    cleanup_.release(); // EEXIST: not ours to remove
    return fail(errno_text("cannot create", temp_path_, err));
  }
  return ok_status();
}

Status AtomicFile::write(std::string_view data) {
  if (fd_ < 0) return fail("write to a closed file " + temp_path_.string());
  if (!write_all(fd_, data)) return fail(errno_text("cannot write", temp_path_, errno));
  return ok_status();
}

Status AtomicFile::publish_hidden(Overwrite overwrite) {
  const std::string by_fd = "/proc/self/fd/" + std::to_string(fd_);
  auto link_as = [&](const fs::path& name) {
    return ::linkat(AT_FDCWD, by_fd.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
  };
  if (overwrite == Overwrite::no) {
    // linkat fails with EEXIST instead of replacing: first writer wins.
    if (!link_as(final_path_)) return fail(errno_text("cannot publish", final_path_, errno));
    return ok_status();
  }
  // A name first, then the rename over the final one; watched meanwhile.
  cleanup_ = TempCleanup(temp_path_);
  if (!link_as(temp_path_)) {
    int err = errno;
    cleanup_.release();
    return fail(errno_text("cannot publish", final_path_, err));
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    int err = errno;
    std::ignore = ::unlink(temp_path_.c_str());
    cleanup_.release();
    return fail(errno_text("cannot publish", final_path_, err));
  }
  cleanup_.release();
  return ok_status();
}

Status AtomicFile::commit(Overwrite overwrite) {
  if (fd_ < 0) return fail("commit of a closed file " + temp_path_.string());
  if (hidden_) {
    auto published = publish_hidden(overwrite);
    int fd = fd_;
    fd_ = -1;
    // Checked after the link, which needs the descriptor open.
    if (::close(fd) != 0 && published) return fail(errno_text("cannot write", final_path_, errno));
    if (published) committed_ = true;
    return published;
  }
  int fd = fd_;
  fd_ = -1;
  // A failed close can mean lost data (NFS, disk full): it must be checked.
  if (::close(fd) != 0) return fail(errno_text("cannot write", temp_path_, errno));
  if (overwrite == Overwrite::no) {
    // link() fails with EEXIST instead of replacing: first writer wins.
    if (::link(temp_path_.c_str(), final_path_.c_str()) != 0) {
      int err = errno;
      return fail(errno_text("cannot publish", final_path_, err));
    }
    std::ignore = ::unlink(temp_path_.c_str());
  } else if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    return fail(errno_text("cannot publish", final_path_, errno));
  }
  committed_ = true;
  cleanup_.release();
  return ok_status();
}

Status write_file_atomic(const fs::path& path, std::string_view data, Overwrite overwrite,
                         unsigned mode) {
  AtomicFile file(path, mode);
  if (auto s = file.open(); !s) return s;
  if (auto s = file.write(data); !s) return s;
  return file.commit(overwrite);
}

Status append_line(const fs::path& path, std::string_view line) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd.valid()) return fail(errno_text("cannot open", path, errno));
  std::string record(line);
  record.push_back('\n');
  if (!write_all(fd.get(), record)) return fail(errno_text("cannot append to", path, errno));
  return ok_status();
}

unsigned process_umask() {
  if (auto status = read_file("/proc/self/status")) {
    constexpr std::string_view kField = "\nUmask:";
    if (auto at = status->find(kField); at != std::string::npos)
      return static_cast<unsigned>(std::strtoul(status->c_str() + at + kField.size(), nullptr, 8)) & 0777U;
  }
  // No /proc (or a kernel before 4.7): the usual default of a login.
  return 022;
}

Status ensure_dir(const fs::path& path, unsigned mode) {
  // mkdir first and look only when it fails: checking before creating races
  // with every other process creating the same directory.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::mkdir(path.c_str(), mode) == 0) return ok_status();
    int err = errno;
    if (err == EEXIST) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return ok_status();
      return fail("cannot use " + path.string() + " as a directory: it exists and is not one");
    }
    if (err != ENOENT || attempt > 0 || !path.has_parent_path() || path.parent_path() == path)
      return fail(errno_text("cannot create directory", path, err));
    if (auto s = ensure_dir(path.parent_path(), mode); !s) return s;
  }
  return fail(errno_text("cannot create directory", path, ENOENT));
}

Result<std::vector<std::string>> list_names(const fs::path& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return fail(errno_text("cannot read the directory", dir, errno));
  std::vector<std::string> names;
  int err = 0;
  for (;;) {
    errno = 0; // readdir tells the end from an error only by errno
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      err = errno;
      break;
    }
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  if (err != 0) return fail(errno_text("cannot read the directory", dir, err));
  return names;
}

namespace {

// Removes `name` in `parent_fd` and, for a directory, everything in it; a
// symlink goes as itself. What the directory listing says of each name
// (d_type) saves a stat per file: eviction removes thousands of entries of
// five files each, and std::filesystem::remove_all stats every one.
Status remove_at(int parent_fd, const char* name, const fs::path& shown) {
  int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ok_status();
    if (errno != ENOTDIR && errno != ELOOP) return fail(errno_text("cannot open", shown, errno));
    // A file, or a symlink (to a directory too): removed as itself.
    if (::unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT) return ok_status();
    return fail(errno_text("cannot remove", shown, errno));
  }
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    ::close(fd);
    return fail(errno_text("cannot read the directory", shown, err));
  }
  Status result = ok_status();
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      if (errno != 0) result = fail(errno_text("cannot read the directory", shown, errno));
      break;
    }
    std::string_view child = e->d_name;
    if (child == "." || child == "..") continue;
    Status s = ok_status();
    if (e->d_type == DT_DIR) s = remove_at(fd, e->d_name, shown / child);
    else if (::unlinkat(fd, e->d_name, 0) != 0 && errno != ENOENT) {
      // DT_UNKNOWN on some file systems: a directory says so now (EISDIR,
      // or POSIX's EPERM).
      s = errno == EISDIR || errno == EPERM ? remove_at(fd, e->d_name, shown / child)
                                            : fail(errno_text("cannot remove", shown / child, errno));
    }
    if (!s) {
      result = s;
      break;
    }
  }
  ::closedir(d);
  if (!result) return result;
  if (::unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    return fail(errno_text("cannot remove", shown, errno));
  return ok_status();
}

} // namespace

Status remove_tree(const fs::path& path) { return remove_at(AT_FDCWD, path.c_str(), path); }

fs::path fully_resolved(const fs::path& path, std::error_code& ec) {
  fs::path once = fs::weakly_canonical(path, ec);
  if (ec) return once;
  return fs::weakly_canonical(once, ec);
}

Result<FileTime> mtime(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(errno_text("cannot stat", path, errno));
  using namespace std::chrono;
  return FileTime(duration_cast<FileTime::duration>(seconds(st.st_mtim.tv_sec) +
                                                    nanoseconds(st.st_mtim.tv_nsec)));
}

Status set_mtime(const fs::path& path, FileTime when) {
  using namespace std::chrono;
  auto ns = duration_cast<nanoseconds>(when.time_since_epoch()).count();
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT; // atime is not ours to manage
  times[1].tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  times[1].tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0)
    return fail(errno_text("cannot set the time of", path, errno));
  return ok_status();
}

TempDir::TempDir(const fs::path& parent, std::string_view prefix) {
  // Absolute, so that it still names the same place for a child that starts
  // in another working directory.
  fs::path base = fs::absolute(parent);
  // Named here rather than by mkdtemp so that it is watched before it
  // exists: a signal between its creation and the watch would leave it.
  for (int attempt = 0;; ++attempt) {
    fs::path candidate = base / (std::string(prefix) + random_suffix());
    cleanup_ = TempCleanup(candidate);
    if (::mkdir(candidate.c_str(), 0700) == 0) {
      path_ = std::move(candidate);
      return;
    }
    int err = errno;
    cleanup_.release(); // EEXIST: not ours to remove
    if (err != EEXIST || attempt >= 100)
      throw EnvironmentError(errno_text("cannot create a temporary directory in", parent, err));
  }
}

TempDir::~TempDir() {
  if (!keep_ && !path_.empty()) std::ignore = remove_tree(path_);
}

UniqueFd::~UniqueFd() { reset(); }

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::vector<std::string> tail_lines(const fs::path& path, std::size_t max_lines) {
  // Read at most the last 64 KiB: enough for any reasonable tail.
  constexpr off_t kTailBytes = 64 * 1024;
  UniqueFd fd(open_for_reading(path));
  if (!fd.valid()) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return {};
  off_t start = st.st_size > kTailBytes ? st.st_size - kTailBytes : 0;
  std::string data(static_cast<size_t>(st.st_size - start), '\0');
  ssize_t n = ::pread(fd.get(), data.data(), data.size(), start);
  if (n <= 0) return {};
  data.resize(static_cast<size_t>(n));
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    lines.emplace_back(data.substr(pos, end - pos));
    pos = end + 1;
  }
  if (start > 0 && !lines.empty()) lines.erase(lines.begin()); // partial first line
  if (lines.size() > max_lines) lines.erase(lines.begin(), lines.end() - static_cast<long>(max_lines));
  return lines;
}

} // namespace npc::util
