#include <npc/cache/entry_lock.hpp>

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

// Owner facts are one short line; anything longer is not ours to parse.
constexpr std::size_t kMaxOwnerRecord = 512;

std::optional<util::LockHolder> read_owner(const fs::path& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  char buffer[kMaxOwnerRecord];
  ssize_t n = ::pread(fd.get(), buffer, sizeof buffer, 0);
  if (n <= 0) return std::nullopt;
  return util::LockHolder::parse(std::string_view(buffer, static_cast<std::size_t>(n)));
}

} // namespace

std::string_view to_string(FrameworkLockState state) {
  switch (state) {
  case FrameworkLockState::absent: return "absent";
  case FrameworkLockState::held_alive: return "held";
  case FrameworkLockState::held: return "held";
  case FrameworkLockState::stale_dead: return "stale (owner gone)";
  case FrameworkLockState::stale_old: return "stale (too old)";
  }
  return "?";
}

std::string FrameworkLockFacts::describe() const {
  std::string age = util::format_seconds(age_seconds) + " old";
  if (owner) return "held by " + owner->describe() + ", " + age;
  return "without owner facts (the framework's, or garbage), " + age;
}

FrameworkLockFacts judge_framework_lock(const fs::path& path, std::chrono::seconds stale_age,
                                        std::chrono::system_clock::time_point now) {
  FrameworkLockFacts facts;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return facts; // absent (or unreadable: nothing to respect)
  auto modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  facts.age_seconds = std::max(0.0, std::chrono::duration<double>(now - modified).count());
  facts.mtime = st.st_mtim;
  facts.owner = read_owner(path);
  util::Liveness owner = facts.owner ? util::liveness(*facts.owner) : util::Liveness::unknown;
  if (owner == util::Liveness::alive) facts.state = FrameworkLockState::held_alive;
  else if (owner == util::Liveness::dead) facts.state = FrameworkLockState::stale_dead;
  else if (facts.age_seconds > static_cast<double>(stale_age.count())) facts.state = FrameworkLockState::stale_old;
  else facts.state = FrameworkLockState::held;
  return facts;
}

bool break_framework_lock(const fs::path& path, const FrameworkLockFacts& judged) {
  if (judged.blocks() || judged.state == FrameworkLockState::absent) return false;
  struct stat before {};
  if (::lstat(path.c_str(), &before) != 0) return false;
  // Moved aside first: if another process replaced the stale lock with a
  // fresh one since we judged it, what moved is not what we judged, and it
  // goes back.
  fs::path aside = path.parent_path() / (std::string(util::kTempPrefix) + "stale-lock." + util::unique_suffix());
  if (::rename(path.c_str(), aside.c_str()) != 0) return false;
  struct stat moved {};
  // A rename changes the ctime; the inode (reused at once after a removal)
  // and the mtime and owner facts together tell the judged file.
  bool same = ::lstat(aside.c_str(), &moved) == 0 && moved.st_dev == before.st_dev &&
              moved.st_ino == before.st_ino && moved.st_mtim.tv_sec == judged.mtime.tv_sec &&
              moved.st_mtim.tv_nsec == judged.mtime.tv_nsec;
  auto owner_now = read_owner(aside);
  bool same_owner = (!owner_now && !judged.owner) ||
                    (owner_now && judged.owner && owner_now->serialize() == judged.owner->serialize());
  if (same && same_owner) {
    std::ignore = util::remove_tree(aside);
    return true;
  }
  // Not the lock we judged: put it back unless a newer one took its place.
  if (::link(aside.c_str(), path.c_str()) == 0 || errno == EEXIST) std::ignore = ::unlink(aside.c_str());
  return false;
}

EntryLock::~EntryLock() { release(); }

EntryLock::EntryLock(EntryLock&& other) noexcept
    : flock_(std::move(other.flock_)), framework_lock_(std::move(other.framework_lock_)), dev_(other.dev_),
      ino_(other.ino_), ctime_(other.ctime_) {
  other.framework_lock_.clear();
}

EntryLock& EntryLock::operator=(EntryLock&& other) noexcept {
  if (this != &other) {
    release();
    flock_ = std::move(other.flock_);
    framework_lock_ = std::move(other.framework_lock_);
    dev_ = other.dev_;
    ino_ = other.ino_;
    ctime_ = other.ctime_;
    other.framework_lock_.clear();
  }
  return *this;
}

void EntryLock::release() {
  if (!framework_lock_.empty()) {
    // Only our own file: an eviction may have moved the entry (and our lock
    // with it) away, and another process may hold a lock there now.
    struct stat st {};
    if (::lstat(framework_lock_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_ &&
        st.st_ctim.tv_sec == ctime_.tv_sec && st.st_ctim.tv_nsec == ctime_.tv_nsec)
      std::ignore = ::unlink(framework_lock_.c_str());
    framework_lock_.clear();
  }
  flock_.release();
}

Result<EntryLock::Attempt> EntryLock::try_acquire(const fs::path& entry_dir, const util::LockHolder& me,
                                                  std::chrono::seconds stale_age, EntryLock& out) {
  Attempt attempt;
  auto ours = util::FileLock::try_acquire(entry_dir / kLockFile, me);
  if (!ours) return fail(ours.error());
  if (!ours->has_value()) return attempt; // another of our processes on this host
  fs::path path = entry_dir / kFrameworkLockFile;
  std::string record = me.serialize() + "\n";
  // Ours now: remember the file's identity (release checks it) and keep both parts.
  auto taken = [&](int fd) -> Result<Attempt> {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      std::ignore = ::unlink(path.c_str());
      return fail(util::errno_text("cannot stat the lock", path, err));
    }
    out.release();
    out.flock_ = std::move(**ours);
    out.framework_lock_ = path;
    out.dev_ = st.st_dev;
    out.ino_ = st.st_ino;
    out.ctime_ = st.st_ctim;
    attempt.outcome = Outcome::taken;
    return attempt;
  };
  // The lock appears with its owner facts already in it: written to a temp
  // file, then linked into place (exclusive, like O_EXCL). A lock created
  // empty and filled after would, if its creator were killed in between,
  // look like the framework's (no owner facts) and block for hours.
  fs::path temp = entry_dir / (std::string(util::kTempPrefix) + "lock-" + std::to_string(::getpid()));
  std::ignore = ::unlink(temp.c_str()); // left by a process of ours with this pid that died
  util::UniqueFd file(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!file.valid()) return fail(util::errno_text("cannot create the lock", temp, errno));
  if (!util::write_all(file.get(), record)) {
    int err = errno;
    std::ignore = ::unlink(temp.c_str());
    return fail(util::errno_text("cannot write the lock", temp, err));
  }
  struct TempRemover {
    const fs::path& path;
    ~TempRemover() { std::ignore = ::unlink(path.c_str()); }
  } remove_temp{temp};
  // Two tries: the second after breaking a stale lock.
  for (int tries = 0; tries < 2; ++tries) {
    if (::link(temp.c_str(), path.c_str()) == 0) {
      std::ignore = ::unlink(temp.c_str()); // changes the inode's ctime: read it after
      return taken(file.get());
    }
    if (errno == EPERM || errno == ENOTSUP || errno == EMLINK) {
      // A filesystem without hard links: created exclusively, then filled.
      util::UniqueFd direct(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (direct.valid()) {
        if (!util::write_all(direct.get(), record)) {
          int err = errno;
          std::ignore = ::unlink(path.c_str());
          return fail(util::errno_text("cannot write the lock", path, err));
        }
        return taken(direct.get());
      }
    }
    if (errno != EEXIST) return fail(util::errno_text("cannot create the lock", path, errno));
    attempt.blocking = judge_framework_lock(path, stale_age, std::chrono::system_clock::now());
    if (attempt.blocking.blocks()) return attempt;
    if (attempt.blocking.state != FrameworkLockState::absent && !break_framework_lock(path, attempt.blocking))
      return attempt; // replaced meanwhile by a live one
  }
  return attempt;
}

} // namespace npc::cache
