#include <npc/util/file_lock.hpp>

#include <mutex>

#include <cerrno>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <npc/util/fs.hpp>
#include <npc/util/random.hpp>
#include <npc/util/strings.hpp>

namespace npc::util {

namespace {

// Backoff between attempts to take a held lock: short enough that a waiter
// sees a finished compile quickly, random so that waiters do not move in step.
constexpr auto kMinBackoff = std::chrono::milliseconds(5);
constexpr auto kMaxBackoff = std::chrono::milliseconds(100);
// How many times to retry when the file we locked was unlinked under us.
constexpr int kMaxRelinkRetries = 100;

std::string read_hostname() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

std::string read_boot_id() {
  auto text = read_file("/proc/sys/kernel/random/boot_id");
  return text ? std::string(trim(*text)) : std::string();
}

bool is_record_value(std::string_view value) {
  for (char c : value)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  return true;
}

bool same_file(int fd, const fs::path& path) {
  struct stat by_fd {}, by_path {};
  if (::fstat(fd, &by_fd) != 0) return false;
  if (::lstat(path.c_str(), &by_path) != 0) return false;
  return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

} // namespace

const std::string& this_host() {
  static const std::string host = read_hostname();
  return host;
}

const std::string& this_boot_id() {
  static const std::string boot = read_boot_id();
  return boot;
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  auto text = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // count fields from the last ')'. starttime is field 22, the 20th after it.
  auto close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text->substr(close + 1));
  std::string field;
  // The state first: a zombie (Z, or X while it goes) has ended and only
  // waits for its parent to collect its status. Its locks are a dead
  // process's, however long the parent takes.
  if (!(in >> field) || field == "Z" || field == "X") return std::nullopt;
  for (int i = 1; i < 19 && (in >> field); ++i) {
  }
  std::uint64_t ticks = 0;
  if (!(in >> ticks)) return std::nullopt;
  return ticks;
}

Liveness liveness(const LockHolder& holder) {
  if (holder.host.empty() || holder.host != this_host()) return Liveness::unknown;
  // Same host name but another boot: everything that ran then is gone.
  if (!holder.boot_id.empty() && !this_boot_id().empty() && holder.boot_id != this_boot_id())
    return Liveness::dead;
  auto started = process_start_ticks(holder.pid);
  if (!started) return Liveness::dead;
  // Without the holder's start time a pid in use proves nothing: pids are
  // reused (pid 1 is always in use). Only the lock's age can judge it then.
  if (holder.process_start == 0) return Liveness::unknown;
  // A pid in use by a process that started at another time was reused.
  if (*started != holder.process_start) return Liveness::dead;
  return Liveness::alive;
}

std::string LockHolder::serialize() const {
  std::ostringstream out;
  out << "pid=" << pid << " host=" << host;
  if (!boot_id.empty()) out << " boot=" << boot_id;
  if (process_start != 0) out << " pstart=" << process_start;
  out << " start=" << start_unix << " tool=" << tool;
  return out.str();
}

std::string LockHolder::describe() const {
  std::time_t t = static_cast<std::time_t>(start_unix);
  char when[32] = "?";
  std::tm tm{};
  if (::gmtime_r(&t, &tm) != nullptr) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "pid " + std::to_string(pid) + " on " + host + (tool.empty() ? "" : " (" + tool + ")") +
         ", since " + when;
}

std::optional<LockHolder> LockHolder::parse(std::string_view text) {
  LockHolder holder;
  bool have_pid = false;
  std::string s(text.substr(0, text.find('\n')));
  std::istringstream in(s);
  std::string field;
  while (in >> field) {
    auto eq = field.find('=');
    if (eq == std::string::npos) return std::nullopt;
    std::string name = field.substr(0, eq), value = field.substr(eq + 1);
    if (!is_record_value(value)) return std::nullopt;
    try {
      if (name == "pid") {
        size_t used = 0;
        long long v = std::stoll(value, &used);
        if (used != value.size() || v <= 0 || v > 0x7fffffff) return std::nullopt;
        holder.pid = static_cast<pid_t>(v);
        have_pid = true;
      } else if (name == "host") {
        holder.host = value;
      } else if (name == "start") {
        size_t used = 0;
        holder.start_unix = std::stoll(value, &used);
        if (used != value.size()) return std::nullopt;
      } else if (name == "tool") {
        holder.tool = value;
      } else if (name == "boot") {
        holder.boot_id = value;
      } else if (name == "pstart") {
        size_t used = 0;
        holder.process_start = std::stoull(value, &used);
        if (used != value.size()) return std::nullopt;
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (!have_pid) return std::nullopt;
  return holder;
}

LockHolder LockHolder::self(const std::string& tool) {
  LockHolder me;
  me.pid = ::getpid();
  me.host = this_host();
  me.boot_id = this_boot_id();
  // Read once per process (after a fork, once again): eviction takes a
  // lock for each of thousands of entries, and our start never changes.
  static std::mutex mutex;
  static pid_t read_for = 0;
  static std::uint64_t ticks = 0;
  {
    std::lock_guard guard(mutex);
    if (read_for != me.pid) {
      ticks = process_start_ticks(me.pid).value_or(0);
      read_for = me.pid;
    }
    me.process_start = ticks;
  }
  me.start_unix = static_cast<std::int64_t>(std::time(nullptr));
  me.tool = tool;
  return me;
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void FileLock::release() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock, and only if the path is still our
  // file (clear-locks --force or an eviction may have moved it).
  if (same_file(fd_, path_)) std::ignore = ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

Result<std::optional<FileLock>> FileLock::try_acquire(const fs::path& path, const LockHolder& me) {
  for (int attempt = 0; attempt < kMaxRelinkRetries; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return fail(errno_text("cannot open lock file", path, errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return std::optional<FileLock>{};
      if (err == EINTR) continue;
      return fail(errno_text("cannot lock", path, err));
    }
    if (!same_file(fd, path)) { // released and unlinked between open and flock
      ::close(fd);
      continue;
    }
    std::string record = me.serialize() + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, record.data(), record.size(), 0) < 0) {
      int err = errno;
      std::ignore = ::unlink(path.c_str());
      ::close(fd);
      return fail(errno_text("cannot write lock record", path, err));
    }
    return std::optional<FileLock>(FileLock(path, fd));
  }
  return fail("cannot lock " + path.string() + ": the lock file keeps being replaced");
}

Result<FileLock> FileLock::acquire(const fs::path& path, const LockHolder& me,
                                   std::chrono::milliseconds timeout,
                                   const std::function<void(const std::optional<LockHolder>&)>& on_wait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = kMinBackoff;
  bool told = false;
  for (;;) {
    auto attempt = try_acquire(path, me);
    if (!attempt) return fail(attempt.error());
    if (attempt->has_value()) return std::move(**attempt);
    if (!told && on_wait) {
      std::optional<LockHolder> holder;
      std::ignore = probe_lock(path, &holder);
      on_wait(holder);
      told = true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::optional<LockHolder> holder;
      std::ignore = probe_lock(path, &holder);
      return fail("timed out after " + format_seconds(static_cast<double>(timeout.count()) / 1000.0) +
                  " waiting for lock " + path.string() + " held by " +
                  (holder ? holder->describe() : std::string("an unknown process")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random_between(kMinBackoff.count(), backoff.count())));
    backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxBackoff));
  }
}

namespace {

// A lock file opened to test its flock, or an invalid descriptor (errno set)
// for what no lock file can be: O_NONBLOCK, so that a FIFO put at its path
// is never waited on, and refused with a device (never opened for long).
// A folder opens as before: its flock is free, and it is no file to unlink.
UniqueFd open_lock_file(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (fd.valid() && (::fstat(fd.get(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))) {
    fd = UniqueFd();
    errno = EINVAL;
  }
  return fd;
}

} // namespace

LockState probe_lock(const fs::path& path, std::optional<LockHolder>* holder) {
  UniqueFd fd = open_lock_file(path);
  if (!fd.valid()) return errno == ENOENT ? LockState::absent : LockState::held;
  if (holder != nullptr) {
    char buffer[512];
    ssize_t n = ::pread(fd.get(), buffer, sizeof buffer - 1, 0);
    if (n > 0) *holder = LockHolder::parse(std::string_view(buffer, static_cast<size_t>(n)));
  }
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return LockState::held;
  return LockState::free; // closing the descriptor drops our shared lock
}

bool remove_lock_file(const fs::path& path, bool force) {
  UniqueFd fd = open_lock_file(path);
  if (!fd.valid()) {
    // Not openable, or no regular file (garbage such as a directory, a
    // dangling symlink or a FIFO): remove only when forced.
    return force && ::unlink(path.c_str()) == 0;
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && !force) return false;
  if (!same_file(fd.get(), path)) return false;
  return ::unlink(path.c_str()) == 0;
}

} // namespace npc::util
