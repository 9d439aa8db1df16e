#include <npc/util/output_file.hpp>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace npc::util {

namespace {

// The kernel's own limit on links followed in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinkHops = 40;
// Copies through a write-through output in pieces of this size: large enough
// that a NEFF of gigabytes takes few system calls, small enough to hold.
constexpr std::size_t kCopyChunkBytes = 1 << 20;

// /proc's links (/dev/stdout -> /proc/self/fd/1 -> "pipe:[123]" or a file
// some shell opened) name open files, not places to rename to: a shell
// writes through them, and so do we.
bool names_an_open_file(const fs::path& path) {
  return path.lexically_normal().string().starts_with("/proc/");
}

// 0 when a file could be created (and was removed) in `dir`, else the errno.
// A real file, not access(): root passes access() on a read-only
// filesystem's directory, and only creating a file tells a full inode table.
// Watched before it exists (TempCleanup): a signal while it exists must not
// leave it beside the user's file.
int probe_directory(const fs::path& dir) {
  // An unnamed file first: made as any file is (so a read-only filesystem
  // or a full inode table says so), and nothing is left if we are killed.
  UniqueFd unnamed(::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (unnamed.valid()) return 0;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return errno;
  fs::path probe = dir / (std::string(kTempPrefix) + "probe-" + unique_suffix());
  TempCleanup cleanup(probe);
  UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    int err = errno;
    cleanup.release(); // EEXIST: not ours to remove
    return err;
  }
  std::ignore = ::unlink(probe.c_str());
  return 0;
}

Result<fs::path> read_link(const fs::path& link, const fs::path& named) {
  std::string target(4096, '\0');
  ssize_t n = ::readlink(link.c_str(), target.data(), target.size());
  if (n < 0) return fail(errno_text("cannot write", named, errno));
  if (static_cast<std::size_t>(n) >= target.size()) return fail(errno_text("cannot write", named, ENAMETOOLONG));
  target.resize(static_cast<std::size_t>(n));
  fs::path next(target);
  return next.is_absolute() ? next : link.parent_path() / next;
}

} // namespace

Result<OutputTarget> resolve_output(const fs::path& path) {
  fs::path at = path;
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    if (names_an_open_file(at)) return OutputTarget{path, OutputKind::write_through};
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) {
      // Nothing there yet (a dangling link included): created at `at`, as
      // a shell creates a link's missing target.
      if (errno == ENOENT) return OutputTarget{at, OutputKind::replace};
      return fail(errno_text("cannot write", path, errno));
    }
    if (S_ISLNK(st.st_mode)) {
      auto next = read_link(at, path);
      if (!next) return fail(next.error());
      at = std::move(*next);
      continue;
    }
    if (S_ISREG(st.st_mode)) return OutputTarget{at, OutputKind::replace};
    if (S_ISDIR(st.st_mode)) return fail(errno_text("cannot write", path, EISDIR));
    return OutputTarget{path, OutputKind::write_through};
  }
  return fail(errno_text("cannot write", path, ELOOP));
}

Status check_output_writable(const fs::path& path) {
  auto target = resolve_output(path);
  if (!target) return fail(target.error());
  if (target->kind == OutputKind::write_through) {
    if (::access(path.c_str(), W_OK) != 0) return fail(errno_text("cannot write", path, errno));
    return ok_status();
  }
  fs::path dir = target->path.has_parent_path() ? target->path.parent_path() : fs::path(".");
  if (int err = probe_directory(dir); err != 0) return fail(errno_text("cannot write", path, err));
  return ok_status();
}

Status check_directory_writable(const fs::path& dir) {
  if (int err = probe_directory(dir); err != 0) return fail(errno_text("cannot create files in", dir, err));
  return ok_status();
}

fs::path staging_dir_for_output(const fs::path& path) {
  if (auto target = resolve_output(path); target && target->kind == OutputKind::replace)
    return target->path.has_parent_path() ? target->path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::path temp = fs::temp_directory_path(ec);
  return ec ? fs::path("/tmp") : temp;
}

OutputFile::OutputFile(fs::path path, unsigned mode) : path_(std::move(path)), mode_(mode) {}

Status OutputFile::open() {
  auto target = resolve_output(path_);
  if (!target) return fail(target.error());
  kind_ = target->kind;
  if (kind_ == OutputKind::replace) {
    // Unnamed until published: an export killed with -9 leaves nothing.
    atomic_.emplace(target->path, mode_, TempName::hidden);
    if (auto s = atomic_->open(); !s) {
      // Said of the path the user gave, not of our temp name beside it.
      if (auto why = check_output_writable(path_); !why) return why;
      return s;
    }
    return ok_status();
  }
  // No O_CREAT: it exists, and is not ours to make if it went meanwhile.
  // A FIFO blocks here until a reader comes, as under a shell.
  through_.reset(::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY));
  if (!through_.valid()) return fail(errno_text("cannot write", path_, errno));
  return ok_status();
}

// AtomicFile's messages name its temp file; the user knows only the path given.
Status OutputFile::said_of_path(Status status) const {
  if (status || !atomic_) return status;
  std::string message = status.error();
  const std::string temp = atomic_->temp_path().string();
  if (auto at = message.find(temp); at != std::string::npos) message.replace(at, temp.size(), path_.string());
  return fail(std::move(message));
}

Status OutputFile::write(std::string_view data) {
  if (atomic_) return said_of_path(atomic_->write(data));
  if (!through_.valid()) return fail("write to a closed file " + path_.string());
  if (!write_all(through_.get(), data)) return fail(errno_text("cannot write", path_, errno));
  return ok_status();
}

Status OutputFile::commit() {
  if (atomic_) return said_of_path(atomic_->commit());
  if (!through_.valid()) return fail("commit of a closed file " + path_.string());
  // A failed close can mean lost data (NFS, a device): it must be checked.
  if (::close(through_.release()) != 0) return fail(errno_text("cannot write", path_, errno));
  return ok_status();
}

int OutputFile::fd() const { return atomic_ ? atomic_->fd() : through_.get(); }

bool same_file_as_stdout(const fs::path& path) {
  struct stat named {}, out {};
  return ::stat(path.c_str(), &named) == 0 && ::fstat(STDOUT_FILENO, &out) == 0 && named.st_dev == out.st_dev &&
         named.st_ino == out.st_ino;
}

Status write_output_file(const fs::path& path, std::string_view data, unsigned mode) {
  OutputFile out(path, mode);
  if (auto s = out.open(); !s) return s;
  if (auto s = out.write(data); !s) return s;
  return out.commit();
}

Status publish_output_from(const fs::path& source, const fs::path& output) {
  auto target = resolve_output(output);
  if (!target) return fail(target.error());
  if (target->kind == OutputKind::replace) {
    if (::rename(source.c_str(), target->path.c_str()) == 0) return ok_status();
    if (errno != EXDEV) return fail(errno_text("cannot write", output, errno));
  }
  UniqueFd in(open_for_reading(source));
  if (!in.valid()) return fail(errno_text("cannot open", source, errno));
  OutputFile out(output);
  if (auto s = out.open(); !s) return s;
  std::string buffer(kCopyChunkBytes, '\0');
  for (;;) {
    ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno_text("cannot read", source, errno));
    if (n == 0) break;
    if (auto s = out.write(std::string_view(buffer.data(), static_cast<std::size_t>(n))); !s) return s;
  }
  if (auto s = out.commit(); !s) return s;
  std::ignore = ::unlink(source.c_str());
  return ok_status();
}

} // namespace npc::util
