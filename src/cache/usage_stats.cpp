#include <npc/cache/usage_stats.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <npc/cache/entry_meta.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

// A shard holds a few hundred bytes; more is not ours.
constexpr std::uint64_t kMaxShardBytes = 1 << 20;

fs::path shard_path(const fs::path& private_dir, int shard) {
  return private_dir / kStatsDir / (std::to_string(shard) + ".json");
}

// What a shard's text says; text that is not a shard's (torn, usage_shard.hpp:
// a write cut short by a crash, or values out of range) counts as empty, so
// that counting goes on.
UsageShard parse_shard(std::string_view text) {
  auto shard = parse_usage_shard(text);
  return shard ? std::move(*shard) : UsageShard{};
}

// One shard, open and locked for as long as it lives.
class LockedShard {
public:
  [[nodiscard]] Status open(const fs::path& path, bool for_update) {
    path_ = path;
    const int flags = (for_update ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW;
    fd_ = util::UniqueFd(::open(path.c_str(), flags, 0666));
    if (!fd_.valid()) {
      absent_ = errno == ENOENT;
      return fail(util::errno_text("cannot open", path, errno));
    }
    while (::flock(fd_.get(), for_update ? LOCK_EX : LOCK_SH) != 0)
      if (errno != EINTR) return fail(util::errno_text("cannot lock", path, errno));
    return ok_status();
  }
  [[nodiscard]] Result<UsageShard> read() const {
    auto text = util::read_fd(fd_.get(), kMaxShardBytes);
    if (!text) return fail(path_.string() + ": " + text.error());
    return parse_shard(*text);
  }
  [[nodiscard]] Status write(const UsageShard& shard) const {
    const std::string text = serialize_usage_shard(shard);
    if (::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
        ::ftruncate(fd_.get(), static_cast<off_t>(text.size())) != 0)
      return fail(util::errno_text("cannot write", path_, errno));
    return ok_status();
  }

  // After open() failed: whether for want of the file.
  [[nodiscard]] bool absent() const { return absent_; }

private:
  fs::path path_;
  util::UniqueFd fd_;
  bool absent_ = false;
};

} // namespace

UsageCounts UsageStats::total() const {
  UsageCounts sum;
  for (const auto& [name, counts] : by_program) sum += counts;
  return sum;
}

Status record_usage(const fs::path& private_dir, std::string_view program, const UsageCounts& delta) {
  if (delta.empty()) return ok_status();
  const fs::path path = shard_path(private_dir, static_cast<int>(::getpid() % kStatsShards));
  LockedShard shard;
  // The folder is made once, by the first count: a hit pays for no check.
  if (auto s = shard.open(path, true); !s) {
    if (!shard.absent()) return s;
    if (auto made = util::ensure_dir(private_dir / kStatsDir); !made) return made;
    if (auto again = shard.open(path, true); !again) return again;
  }
  auto current = shard.read();
  if (!current) return fail(current.error());
  auto found = current->by_program.find(program);
  if (found == current->by_program.end())
    found = current->by_program.emplace(std::string(program), UsageCounts{}).first;
  found->second += delta;
  return shard.write(*current);
}

Result<UsageStats> read_usage(const fs::path& private_dir) {
  UsageStats sum;
  std::int64_t zeroed = 0;
  for (int i = 0; i < kStatsShards; ++i) {
    const fs::path path = shard_path(private_dir, i);
    LockedShard shard;
    if (auto s = shard.open(path, false); !s) {
      if (shard.absent()) continue;
      return fail(s.error());
    }
    auto read = shard.read();
    if (!read) return fail(read.error());
    for (const auto& [name, counts] : read->by_program) sum.by_program[name] += counts;
    zeroed = std::max(zeroed, read->zeroed_unix);
  }
  if (zeroed > 0) sum.zeroed_at = util::WallTime(std::chrono::seconds(zeroed));
  return sum;
}

Status zero_usage(const fs::path& private_dir, util::WallTime now) {
  if (auto s = util::ensure_dir(private_dir / kStatsDir); !s) return s;
  UsageShard zeroed;
  zeroed.zeroed_unix = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  for (int i = 0; i < kStatsShards; ++i) {
    LockedShard shard;
    if (auto s = shard.open(shard_path(private_dir, i), true); !s) return s;
    if (auto s = shard.write(zeroed); !s) return s;
  }
  return ok_status();
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
