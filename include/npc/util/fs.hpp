#pragma once
// Filesystem helpers. Final files are never written in place: AtomicFile
// writes a temp name in the same directory and renames it on commit().

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>
#include <npc/util/temp_cleanup.hpp>

namespace npc::util {

namespace fs = std::filesystem;
using FileTime = std::chrono::system_clock::time_point;

// "<what> <path>: <strerror(err)>"
std::string errno_text(std::string_view what, const fs::path& path, int err);

// Prefix of every temporary name this project creates; eviction and repair
// recognise stale ones by it.
inline constexpr std::string_view kTempPrefix = ".tmp-";
[[nodiscard]] bool is_temp_name(std::string_view filename);

[[nodiscard]] Result<std::string> read_file(const fs::path& path);

// open(path, O_RDONLY | flags) that leaves the file's atime alone where the
// kernel lets us (O_NOATIME: the file's owner, or CAP_FOWNER; elsewhere a
// plain open). A cache entry's last use is the framework's reads (atime) and
// the marks our own hits set; a read of ours to check, copy or export must
// never count as one, or eviction would keep whatever was last verified.
// Every read of this project goes through it. Returns -1 with errno set.
[[nodiscard]] int open_for_reading(const fs::path& path, int flags = 0);
// The whole content of an open descriptor, from its start; fails past
// max_bytes (records in a shared cache are not trusted to be small).
[[nodiscard]] Result<std::string> read_fd(int fd, std::uint64_t max_bytes);

enum class Overwrite { no, yes };

// Where an AtomicFile's data lives until commit():
//  - named: "<dir>/.tmp-<name>.<pid>.<random>", which a reader of the
//    directory (eviction, repair) sees and which a signal handler removes;
//  - hidden: an unnamed file (O_TMPFILE) linked in at commit, so a writer
//    killed with -9 leaves nothing at all; for large outputs the user names
//    (an export of gigabytes). Where the filesystem or a missing /proc does
//    not allow it, named.
enum class TempName { named, hidden };

// Writes to a temp file in the final directory, renames over the final name
// on commit(). The destructor removes an uncommitted temp.
class AtomicFile {
public:
  explicit AtomicFile(fs::path final_path, unsigned mode = 0666, // less the umask
                      TempName temp_name = TempName::named);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  [[nodiscard]] Status open();
  [[nodiscard]] Status write(std::string_view data);
  // Overwrite::no fails (and removes the temp) when the final name exists.
  [[nodiscard]] Status commit(Overwrite overwrite = Overwrite::yes);
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const fs::path& temp_path() const { return temp_path_; }

private:
  [[nodiscard]] Status publish_hidden(Overwrite overwrite);

  fs::path final_path_;
  fs::path temp_path_;
  unsigned mode_;
  TempName temp_name_;
  bool hidden_ = false; // open() made an unnamed file
  int fd_ = -1;
  bool committed_ = false;
  TempCleanup cleanup_; // the temp goes if a signal ends us before commit
};

[[nodiscard]] Status write_file_atomic(const fs::path& path, std::string_view data,
                                       Overwrite overwrite = Overwrite::yes,
                                       unsigned mode = 0666);

// Appends one line with a single write() on an O_APPEND descriptor, so many
// processes can append to one file at once without interleaving (lines up to
// PIPE_BUF bytes are atomic on local filesystems).
[[nodiscard]] Status append_line(const fs::path& path, std::string_view line);

// The process's umask, read without changing it (/proc/self/status): the
// umask(2) call that reads it also sets it, which races with every other
// thread creating files meanwhile.
[[nodiscard]] unsigned process_umask();

// mkdir -p; fails when the path exists and is not a directory.
[[nodiscard]] Status ensure_dir(const fs::path& path, unsigned mode = 0777); // less the umask

// The names in a directory, without "." and "..", in no particular order.
[[nodiscard]] Result<std::vector<std::string>> list_names(const fs::path& dir);

// Removes a file or a directory tree; a missing path is fine.
[[nodiscard]] Status remove_tree(const fs::path& path);

// The path with every link in it resolved, as far as it exists. Once is not
// enough: weakly_canonical resolves only up to the first part that is
// missing and normalizes the rest by its words, so "ROOT/missing/../v/LINK/g"
// comes back as "ROOT/v/LINK/g", its link unresolved. The second pass starts
// from a path with no "..", whose existing part is then all resolved.
[[nodiscard]] fs::path fully_resolved(const fs::path& path, std::error_code& ec);

[[nodiscard]] Result<FileTime> mtime(const fs::path& path);
[[nodiscard]] Status set_mtime(const fs::path& path, FileTime when);

// "<pid>.<8 random characters>": a name no other process or thread picks at
// the same time, for temps and for files moved aside.
[[nodiscard]] std::string unique_suffix();

// A fresh directory "<parent>/<prefix><8 random characters>", removed by the destructor
// unless keep() was called.
class TempDir {
public:
  TempDir(const fs::path& parent, std::string_view prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }
  void keep() {
    keep_ = true;
    cleanup_.release();
  }

private:
  fs::path path_;
  bool keep_ = false;
  TempCleanup cleanup_;
};

// Closes a file descriptor on scope exit.
class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

private:
  int fd_ = -1;
};

// Writes all of data to fd, retrying on EINTR and short writes.
[[nodiscard]] bool write_all(int fd, std::string_view data);

// Last `max_lines` lines of a text file (for failure reports).
[[nodiscard]] std::vector<std::string> tail_lines(const fs::path& path, std::size_t max_lines);

} // namespace npc::util
