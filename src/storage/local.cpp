#include <npc/storage/local.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::storage {

namespace fs = std::filesystem;

namespace {

bool exists_no_follow(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

Status ensure_parent(const fs::path& path) {
  return path.has_parent_path() ? util::ensure_dir(path.parent_path()) : ok_status();
}

// Renames src to dst; across filesystems, copies (atomically for readers of
// dst) and removes src.
Status move_file(const fs::path& src, const fs::path& dst) {
  if (::rename(src.c_str(), dst.c_str()) == 0) return ok_status();
  if (errno != EXDEV) return fail(util::errno_text("cannot publish", dst, errno));
  util::UniqueFd in(util::open_for_reading(src, O_NOFOLLOW));
  if (!in.valid()) return fail(util::errno_text("cannot open", src, errno));
  util::AtomicFile out(dst);
  if (auto s = out.open(); !s) return s;
  if (auto d = util::sha256_fd(in.get(), out.fd()); !d) return fail("cannot copy to " + dst.string() + ": " + d.error());
  if (auto s = out.commit(); !s) return s;
  std::ignore = ::unlink(src.c_str());
  return ok_status();
}

// A directory's create-only writes are link(2): exactly one of racing
// creators wins, on every filesystem this cache supports.
std::shared_ptr<Learned> exact_creates() {
  auto learned = std::make_shared<Learned>();
  learned->exclusive_create_exact = true;
  return learned;
}

} // namespace

LocalStorage::LocalStorage(fs::path root, fs::path trash)
    : Storage(root.string(), exact_creates()), root_(std::move(root)), trash_(std::move(trash)) {}

fs::path LocalStorage::path(std::string_view key) const { return key.empty() ? root_ : root_ / fs::path(key); }

Result<std::vector<std::string>> LocalStorage::list(std::string_view dir) const {
  auto names = util::list_names(path(dir));
  if (!names && !exists_no_follow(path(dir))) return std::vector<std::string>{};
  return names;
}

Result<std::vector<TreeFile>> LocalStorage::list_tree(std::string_view dir) const {
  fs::path top = path(dir);
  std::vector<TreeFile> files;
  if (!exists_no_follow(top)) return files;
  std::error_code ec;
  // Symlinks are listed as what they are, never followed: a link out of the
  // cache must not make a listing walk elsewhere.
  fs::recursive_directory_iterator it(top, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) {
      if (errno == ENOENT) continue; // removed while we walked
      return fail(util::errno_text("cannot stat", it->path(), errno));
    }
    if (S_ISDIR(st.st_mode)) continue;
    using namespace std::chrono;
    files.push_back({it->path().lexically_relative(top).generic_string(), static_cast<std::uint64_t>(st.st_size),
                     Time(duration_cast<Time::duration>(seconds(st.st_mtim.tv_sec) + nanoseconds(st.st_mtim.tv_nsec)))});
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return fail(util::errno_text("cannot list", top, ec.value()));
  std::sort(files.begin(), files.end(), [](const TreeFile& a, const TreeFile& b) { return a.key < b.key; });
  return files;
}

Result<std::optional<ObjectInfo>> LocalStorage::stat(std::string_view key) const {
  fs::path p = path(key);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<ObjectInfo>{};
    return fail(util::errno_text("cannot stat", p, errno));
  }
  using namespace std::chrono;
  ObjectInfo info;
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.modified = Time(duration_cast<Time::duration>(seconds(st.st_mtim.tv_sec) + nanoseconds(st.st_mtim.tv_nsec)));
  info.directory = S_ISDIR(st.st_mode);
  return std::optional<ObjectInfo>(info);
}

Result<bool> LocalStorage::read(std::string_view key, const Into& into) const {
  fs::path p = path(key);
  util::UniqueFd in(util::open_for_reading(p, O_NOFOLLOW | O_NONBLOCK));
  if (!in.valid()) {
    if (errno == ENOENT) return false;
    return fail(util::errno_text("cannot open", p, errno));
  }
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return fail(util::errno_text("cannot stat", p, errno));
  if (!S_ISREG(st.st_mode)) return fail(p.string() + " is not a regular file");
  if (std::string* bytes = into.memory()) {
    auto read = util::read_fd(in.get(), into.max_bytes());
    if (!read) return fail("cannot read " + p.string() + ": " + read.error());
    *bytes = std::move(*read);
    return true;
  }
  util::AtomicFile out(*into.file());
  if (auto s = out.open(); !s) return fail(s.error());
  if (auto d = util::sha256_fd(in.get(), out.fd()); !d) return fail("cannot copy " + p.string() + ": " + d.error());
  if (auto s = out.commit(); !s) return fail(s.error());
  return true;
}

Result<bool> LocalStorage::write(std::string_view key, const Body& body, IfPresent if_present) {
  if (const fs::path* local = body.file()) return place_file(*local, key, if_present);
  return write_bytes(key, body.bytes(), if_present);
}

Result<bool> LocalStorage::write_bytes(std::string_view key, std::string_view bytes, IfPresent if_present) {
  fs::path p = path(key);
  if (if_present == IfPresent::replace) {
    if (auto s = ensure_parent(p); !s) return fail(s.error());
    if (auto s = util::write_file_atomic(p, bytes); !s) return fail(s.error());
    return true;
  }
  if (exists_no_follow(p)) return false;
  // The temp file is linked into place: link(2) fails with EEXIST for all
  // but one of many writers, and a reader never sees a partial file. A
  // file that was there at the link and is gone at the look after (a lock
  // released meanwhile) is no error: the create is tried again. So is a
  // folder removed between its creation and the write (an eviction taking
  // the entry away as a graph is stored into it again): made again, as a
  // key's folder always is.
  for (int attempt = 0;; ++attempt) {
    if (auto s = ensure_parent(p); !s) return fail(s.error());
    auto written = util::write_file_atomic(p, bytes, util::Overwrite::no);
    if (written) return true;
    if (exists_no_follow(p)) return false;
    if (attempt == 2) return fail(written.error());
  }
}

Result<bool> LocalStorage::place_file(const fs::path& local, std::string_view key, IfPresent if_present) {
  fs::path p = path(key);
  if (auto s = ensure_parent(p); !s) return fail(s.error());
  if (if_present == IfPresent::keep) {
    if (::link(local.c_str(), p.c_str()) == 0) {
      std::ignore = ::unlink(local.c_str());
      return true;
    }
    if (errno == EEXIST || exists_no_follow(p)) {
      std::ignore = ::unlink(local.c_str());
      return false;
    }
    // A filesystem without hard links: rename, which would replace a file
    // that appeared since the check above (the same content, for a cache).
  }
  if (auto s = move_file(local, p); !s) return fail(s.error());
  return true;
}

Status LocalStorage::remove(std::string_view key) {
  fs::path p = path(key);
  if (::unlink(p.c_str()) != 0 && errno != ENOENT) return fail(util::errno_text("cannot remove", p, errno));
  return ok_status();
}

namespace {

// The folder of a file, flock(2)ed: conditional changes of the files in it
// (lock.hpp's breaks, releases and renewals) take turns, so that what one of
// them looked at is what it changes. The kernel drops it when its holder
// dies. Nothing else takes it (older releases flock npc-compile.lock).
class FolderTurn {
public:
  explicit FolderTurn(const fs::path& folder)
      : fd_(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    while (fd_.valid() && ::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  [[nodiscard]] bool taken() const { return fd_.valid(); }

private:
  util::UniqueFd fd_;
};

// Whether `path` is still what was read: `bytes` (a folder reads as empty)
// and, when given, its modification time.
Result<bool> unchanged(const fs::path& path, std::string_view bytes, std::optional<Time> modified) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    return fail(util::errno_text("cannot stat", path, errno));
  }
  using namespace std::chrono;
  if (modified &&
      Time(duration_cast<Time::duration>(seconds(st.st_mtim.tv_sec) + nanoseconds(st.st_mtim.tv_nsec))) != *modified)
    return false;
  if (S_ISDIR(st.st_mode)) return bytes.empty();
  if (static_cast<std::uint64_t>(st.st_size) != bytes.size()) return false;
  util::UniqueFd fd(util::open_for_reading(path, O_NOFOLLOW));
  if (!fd.valid()) return errno == ENOENT ? Result<bool>(false) : fail(util::errno_text("cannot read", path, errno));
  std::string found(bytes.size() + 1, '\0');
  ssize_t n = ::pread(fd.get(), found.data(), found.size(), 0);
  if (n < 0) return fail(util::errno_text("cannot read", path, errno));
  return std::string_view(found.data(), static_cast<std::size_t>(n)) == bytes;
}

} // namespace

Result<bool> LocalStorage::change_if_unchanged(std::string_view key, const Seen& seen,
                                               std::optional<std::string_view> replacement) {
  fs::path p = path(key);
  FolderTurn turn(p.parent_path());
  if (!turn.taken()) return errno == ENOENT ? Result<bool>(false) : fail(util::errno_text("cannot open", p.parent_path(), errno));
  auto same = unchanged(p, seen.bytes, seen.modified);
  if (!same || !*same) return same;
  if (replacement) {
    if (auto s = util::write_file_atomic(p, *replacement); !s) return fail(s.error());
    return true;
  }
  if (::unlink(p.c_str()) != 0) {
    if (errno == ENOENT) return false;
    if (errno != EISDIR) return fail(util::errno_text("cannot remove", p, errno));
    if (auto s = util::remove_tree(p); !s) return fail(s.error());
  }
  return true;
}

Result<bool> LocalStorage::remove_tree(std::string_view dir) {
  // One rename takes the whole folder away.
  fs::path p = path(dir);
  fs::path target = trash_ / (p.filename().string() + "." + util::unique_suffix());
  auto move_to_trash = [&] { return ::rename(p.c_str(), target.c_str()) == 0 ? 0 : errno; };
  // The trash is made by the first removal that finds it missing, not
  // checked before each: eviction removes thousands of entries.
  bool have_trash = true;
  int err = move_to_trash();
  if (err == ENOENT) {
    if (!exists_no_follow(p)) return false; // removed by another process meanwhile
    have_trash = static_cast<bool>(util::ensure_dir(trash_));
    if (have_trash) err = move_to_trash();
  }
  if (have_trash && err == 0) {
    // Gone for readers; deleting the files is cleanup (Cache::empty_trash
    // finishes what an interrupted removal leaves).
    if (auto s = util::remove_tree(target); !s) spdlog::warn("{}", s.error());
    return true;
  }
  if (have_trash && err == ENOENT) return false;
  if (have_trash && err != EXDEV) return fail(util::errno_text("cannot remove", p, err));
  // No trash on this file system: deleted in place.
  if (auto s = util::remove_tree(p); !s) return fail(s.error());
  return true;
}

Status LocalStorage::set_folder_time(std::string_view dir, Time when) { return util::set_mtime(path(dir), when); }

} // namespace npc::storage
