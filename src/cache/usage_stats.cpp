#include <npc/cache/usage_stats.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <variant>

#include <npc/cache/entry_meta.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

// A shard holds a few hundred bytes; more is not ours (read as torn, unread).
constexpr std::uint64_t kMaxShardBytes = 1 << 20;
// Between two looks at locks another process holds: short, as a holder is
// done within microseconds; doubled up to the longest.
constexpr auto kFirstLockPause = std::chrono::milliseconds(1);
constexpr auto kLongestLockPause = std::chrono::milliseconds(32);

fs::path stats_dir(const fs::path& private_dir) { return private_dir / kStatsDir; }

fs::path shard_path(const fs::path& private_dir, int shard) {
  return stats_dir(private_dir) / (std::to_string(shard) + ".json");
}

// "opened to read: Permission denied": what could not be done, for
// UnreadShard::detail.
std::string failed(std::string_view what, int err) { return std::string(what) + ": " + std::strerror(err); }

std::string seconds_text(std::chrono::milliseconds wait) {
  return util::format_seconds(std::chrono::duration_cast<std::chrono::duration<double>>(wait).count());
}

// Why no shard can be in the stats folder: it is not a directory (nor a
// symbolic link to one), or it cannot be looked at. nullopt: a directory,
// or nothing yet.
std::optional<UnreadShard> folder_fault(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::nullopt;
    return UnreadShard{dir, ShardFault::no_folder, std::string(util::file_type_name(st.st_mode))};
  }
  const int err = errno;
  if (err == ENOENT) {
    if (::lstat(dir.c_str(), &st) == 0) return UnreadShard{dir, ShardFault::no_folder, "symbolic link to nothing"};
    return std::nullopt;
  }
  if (err == ENOTDIR) return UnreadShard{dir.parent_path(), ShardFault::no_folder, "file"};
  return UnreadShard{dir, ShardFault::inaccessible, failed("looked at", err)};
}

enum class Access { read, update };

// How long the locks of the counters are waited for: until one deadline for
// all the shards a command looks at, so that sixteen shards held by a
// stopped process cost one wait, not sixteen.
struct LockWait {
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds total; // for the message
  static LockWait from_now(std::chrono::milliseconds total) {
    return {std::chrono::steady_clock::now() + total, total};
  }
};

// One shard, open and locked for as long as it lives, or why not.
class LockedShard {
public:
  enum class Opened {
    locked, // open and locked
    absent, // no such file (reading); no stats folder (updating)
    fault   // fault() says why
  };

  // Looks before it opens (lstat) and again once open (fstat), and opens
  // without blocking or following a link: whatever is in the shard's place
  // is never read or waited on unless it is a regular file.
  [[nodiscard]] Opened open(const fs::path& path, Access access, const LockWait& lock_wait) {
    path_ = path;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode)) return not_a_file(st.st_mode);
    } else if (errno == ENOTDIR) {
      return set_fault({path.parent_path(), ShardFault::no_folder, "file"});
    } else if (errno != ENOENT) {
      return set_fault({path, ShardFault::inaccessible, failed("looked at", errno)});
    } else if (access == Access::read) {
      return Opened::absent;
    }
    const int flags = (access == Access::update ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW |
                      O_NONBLOCK | O_NOCTTY;
    fd_ = util::UniqueFd(::open(path.c_str(), flags, 0666));
    if (!fd_.valid()) {
      switch (errno) {
      case ENOENT: return Opened::absent;
      case ENOTDIR: return set_fault({path.parent_path(), ShardFault::no_folder, "file"});
      case ELOOP: return not_a_file(S_IFLNK); // swapped in since the look
      case EISDIR: return not_a_file(S_IFDIR);
      case ENXIO: return not_a_file(S_IFSOCK);
      default:
        return set_fault({path, ShardFault::inaccessible,
                          failed(access == Access::update ? "opened to write" : "opened to read", errno)});
      }
    }
    if (::fstat(fd_.get(), &st) != 0) return set_fault({path, ShardFault::inaccessible, failed("looked at", errno)});
    if (!S_ISREG(st.st_mode)) return not_a_file(st.st_mode);
    return lock(access == Access::update ? LOCK_EX : LOCK_SH, lock_wait);
  }

  [[nodiscard]] const UnreadShard& fault() const { return fault_; }

  // The shard's counters, or why they cannot be counted (torn, inaccessible).
  [[nodiscard]] std::variant<UsageShard, UnreadShard> read() const {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) return UnreadShard{path_, ShardFault::inaccessible, failed("looked at", errno)};
    if (static_cast<std::uint64_t>(st.st_size) > kMaxShardBytes)
      return UnreadShard{path_, ShardFault::torn, "larger than a shard can be: " + std::to_string(st.st_size) +
                                                      " bytes, at most " + std::to_string(kMaxShardBytes)};
    auto text = util::read_fd(fd_.get(), kMaxShardBytes);
    if (!text) return UnreadShard{path_, ShardFault::inaccessible, "read (" + text.error() + ")"};
    auto shard = parse_usage_shard(*text);
    if (!shard) return UnreadShard{path_, ShardFault::torn, shard.error()};
    return std::move(*shard);
  }

  // nullopt once written, else why not.
  [[nodiscard]] std::optional<UnreadShard> write(const UsageShard& shard) const {
    const std::string text = serialize_usage_shard(shard);
    const ssize_t wrote = ::pwrite(fd_.get(), text.data(), text.size(), 0);
    if (wrote < 0) return UnreadShard{path_, ShardFault::inaccessible, failed("written", errno)};
    if (wrote != static_cast<ssize_t>(text.size())) // torn now: the next count rewrites it
      return UnreadShard{path_, ShardFault::inaccessible, "written whole: cut short after " + std::to_string(wrote) +
                                                              " bytes"};
    if (::ftruncate(fd_.get(), static_cast<off_t>(text.size())) != 0)
      return UnreadShard{path_, ShardFault::inaccessible, failed("written", errno)};
    return std::nullopt;
  }

private:
  Opened set_fault(UnreadShard fault) {
    fault_ = std::move(fault);
    fd_ = util::UniqueFd();
    return Opened::fault;
  }
  Opened not_a_file(unsigned mode) {
    return set_fault({path_, ShardFault::not_a_file, std::string(util::file_type_name(mode))});
  }
  // Tries, and tries again after a pause, until the wait's deadline: flock
  // has no timeout, and a holder that is stopped must not stop us.
  Opened lock(int operation, const LockWait& wait) {
    auto pause = kFirstLockPause;
    for (;;) {
      if (::flock(fd_.get(), operation | LOCK_NB) == 0) return Opened::locked;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK)
        return set_fault({path_, ShardFault::inaccessible, failed("locked", errno)});
      if (std::chrono::steady_clock::now() >= wait.deadline)
        return set_fault({path_, ShardFault::busy,
                          "locked by another process (waited " + seconds_text(wait.total) + " for the counters)"});
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestLockPause);
    }
  }

  fs::path path_;
  util::UniqueFd fd_;
  UnreadShard fault_{};
};

} // namespace

UsageCounts UsageStats::total() const {
  UsageCounts sum;
  for (const auto& [name, counts] : by_program) sum += counts;
  return sum;
}

Status record_usage(const fs::path& private_dir, std::string_view program, const UsageCounts& delta,
                    std::chrono::milliseconds lock_wait) {
  if (delta.empty()) return ok_status();
  const int first = static_cast<int>(::getpid() % kStatsShards);
  const auto deadline = std::chrono::steady_clock::now() + lock_wait;
  const LockWait at_once{std::chrono::steady_clock::now(), lock_wait}; // another shard rather than wait
  auto pause = kFirstLockPause;
  std::optional<UnreadShard> passed_over; // the first shard that could not be used, for the message
  for (;;) {
    bool some_held = false;
    for (int n = 0; n < kStatsShards; ++n) {
      const fs::path path = shard_path(private_dir, (first + n) % kStatsShards);
      LockedShard shard;
      auto opened = shard.open(path, Access::update, at_once);
      if (opened == LockedShard::Opened::absent) {
        // The folder is made once, by the first count: a hit pays for no check.
        if (auto made = util::ensure_dir(stats_dir(private_dir)); !made) return made;
        opened = shard.open(path, Access::update, at_once);
      }
      if (opened == LockedShard::Opened::absent) continue; // the folder went again meanwhile
      if (opened == LockedShard::Opened::fault) {
        if (shard.fault().fault == ShardFault::no_folder) return fail(describe(shard.fault()));
        some_held = some_held || shard.fault().fault == ShardFault::busy;
        if (!passed_over && shard.fault().fault != ShardFault::busy) passed_over = shard.fault();
        continue;
      }
      auto current = shard.read();
      if (auto* unread = std::get_if<UnreadShard>(&current); unread && unread->fault != ShardFault::torn) {
        if (!passed_over) passed_over = *unread;
        continue;
      }
      // A torn shard counts as empty, and is rewritten so that counting goes on.
      UsageShard counts = std::holds_alternative<UsageShard>(current) ? std::get<UsageShard>(current) : UsageShard{};
      counts.by_program[std::string(program)] += delta;
      if (auto unwritten = shard.write(counts)) return fail(describe(*unwritten));
      return ok_status();
    }
    if (!some_held || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestLockPause);
  }
  if (passed_over) return fail("no shard of the counters can be used: " + describe(*passed_over) + ", and others");
  return fail("every shard of the counters in " + stats_dir(private_dir).string() +
              " was locked by another process for over " + seconds_text(lock_wait));
}

UsageStats read_usage(const fs::path& private_dir, std::chrono::milliseconds lock_wait) {
  UsageStats sum;
  if (auto fault = folder_fault(stats_dir(private_dir))) {
    sum.unread.push_back(std::move(*fault));
    return sum;
  }
  std::int64_t zeroed = 0;
  const LockWait wait = LockWait::from_now(lock_wait);
  for (int i = 0; i < kStatsShards; ++i) {
    LockedShard shard;
    switch (shard.open(shard_path(private_dir, i), Access::read, wait)) {
    case LockedShard::Opened::absent: continue;
    case LockedShard::Opened::fault: sum.unread.push_back(shard.fault()); continue;
    case LockedShard::Opened::locked: break;
    }
    auto read = shard.read();
    if (auto* unread = std::get_if<UnreadShard>(&read)) {
      sum.unread.push_back(std::move(*unread));
      continue;
    }
    const UsageShard& counts = std::get<UsageShard>(read);
    for (const auto& [name, c] : counts.by_program) sum.by_program[name] += c;
    zeroed = std::max(zeroed, counts.zeroed_unix);
  }
  if (zeroed > 0) sum.zeroed_at = util::WallTime(std::chrono::seconds(zeroed));
  return sum;
}

ZeroReport zero_usage(const fs::path& private_dir, util::WallTime now, std::chrono::milliseconds lock_wait) {
  ZeroReport report;
  const fs::path dir = stats_dir(private_dir);
  if (auto fault = folder_fault(dir)) {
    // A file (or a link to anything but a directory) where the folder
    // should be: only its name is removed, whatever it is.
    if (fault->fault != ShardFault::no_folder || fault->path != dir) {
      report.left.push_back(std::move(*fault));
      return report;
    }
    if (::unlink(dir.c_str()) != 0) {
      fault->detail += " that cannot be removed: " + std::string(std::strerror(errno));
      report.left.push_back(std::move(*fault));
      return report;
    }
    report.replaced.push_back(std::move(*fault));
  }
  if (auto made = util::ensure_dir(dir); !made) {
    report.left.push_back({dir, ShardFault::inaccessible, "made: " + made.error()});
    return report;
  }
  UsageShard zeroed;
  zeroed.zeroed_unix = std::clamp<std::int64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count(), 0, kMaxZeroedUnix);
  const LockWait wait = LockWait::from_now(lock_wait);
  for (int i = 0; i < kStatsShards; ++i) {
    const fs::path path = shard_path(private_dir, i);
    // Something else in a shard's place: its name removed (a directory only
    // when empty, never with what it holds), a shard made in its place.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      UnreadShard found{path, ShardFault::not_a_file, std::string(util::file_type_name(st.st_mode))};
      if ((S_ISDIR(st.st_mode) ? ::rmdir(path.c_str()) : ::unlink(path.c_str())) != 0) {
        found.detail += errno == ENOTEMPTY || errno == EEXIST ? " with files in it"
                                                              : " that cannot be removed: " +
                                                                    std::string(std::strerror(errno));
        report.left.push_back(std::move(found));
        continue;
      }
      report.replaced.push_back(std::move(found));
    }
    LockedShard shard;
    if (shard.open(path, Access::update, wait) != LockedShard::Opened::locked) {
      report.left.push_back(shard.fault().path.empty()
                                ? UnreadShard{path, ShardFault::inaccessible, failed("opened to write", ENOENT)}
                                : shard.fault());
      continue;
    }
    if (auto unwritten = shard.write(zeroed)) report.left.push_back(std::move(*unwritten));
  }
  return report;
}

std::string describe(const UnreadShard& shard) {
  const std::string path = shard.path.string();
  switch (shard.fault) {
  case ShardFault::torn: return path + " is torn (" + shard.detail + ")";
  case ShardFault::not_a_file: return path + " is a " + shard.detail + ", not a file";
  case ShardFault::inaccessible: return path + " cannot be " + shard.detail;
  case ShardFault::busy: return path + " is " + shard.detail;
  case ShardFault::no_folder: return path + " is a " + shard.detail + ", not a directory";
  }
  return path;
}

UsageCounts hit_of(const fs::path& entry_dir) {
  UsageCounts hit;
  hit.hits = 1;
  auto meta = read_entry_meta(entry_dir);
  const AttemptRecord* success = meta ? meta->last_success() : nullptr;
  if (success && success->wall_seconds > 0) hit.saved_seconds = success->wall_seconds;
  else hit.hits_without_time = 1;
  return hit;
}

} // namespace npc::cache
