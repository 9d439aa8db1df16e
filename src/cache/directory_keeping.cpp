#include <npc/cache/keeping_way.hpp>

#include <cerrno>
#include <sys/stat.h>
#include <system_error>

#include <npc/cache/eviction.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/leftover_temps.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/trust.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

class FlockedEviction final : public KeepingWay::EvictionHold {
public:
  explicit FlockedEviction(util::FileLock lock) : lock_(std::move(lock)) {}

private:
  util::FileLock lock_;
};

std::size_t remove_stale_temps(const EntryInfo& entry, util::WallTime now) {
  if (entry.temp_files.empty() || entry.state == EntryState::locked) return 0;
  std::size_t removed = 0;
  for (const auto& temp : remove_dead_temps(entry.dir, entry.temp_files, LockHeld::no, now))
    if (temp.error.empty()) ++removed;
  return removed;
}

class DirectoryKeeping final : public KeepingWay {
public:
  Status ensure_root(const Cache& cache) const override {
    const fs::path& root = cache.root();
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      if (root.has_parent_path())
        if (auto s = util::ensure_dir(root.parent_path(), 0755); !s) return s;
      // The cache holds code that will run on the accelerator: private to the
      // user unless a shared cache is set up on purpose.
      if (::mkdir(root.c_str(), 0700) != 0) {
        if (errno != EEXIST)
          return fail(util::errno_text("cannot create the cache directory", root, errno) +
                      " (set --cache_dir in NEURON_CC_FLAGS to a writable place)");
      } else if (::chmod(root.c_str(), root_mode(cache.trust())) != 0) { // exact mode, whatever the umask
        return fail(util::errno_text("cannot set the mode of", root, errno));
      }
    }
    if (!fs::is_directory(root, ec))
      return fail("the cache path " + root.string() + " exists and is not a directory");
    if (auto s = check_directory_trust(root, cache.trust(), "the cache directory", Links::follow_owned); !s)
      return s;
    // Below the root, modes follow the umask: the root alone decides who gets in.
    if (auto s = util::ensure_dir(cache.private_dir()); !s) return s;
    return ok_status();
  }

  void empty_trash(const Cache& cache) const override {
    fs::path trash = cache.private_dir() / kTrashDir;
    for (const auto& name : util::list_names(trash).value_or(std::vector<std::string>{}))
      std::ignore = util::remove_tree(trash / name);
  }

  // A flock, as older releases take it.
  std::unique_ptr<EvictionHold> take_eviction_lock(const Cache& cache) const override {
    if (auto s = util::ensure_dir(cache.private_dir()); !s) throw EnvironmentError(s.error());
    auto taken = util::FileLock::try_acquire(cache.private_dir() / kEvictionLock,
                                             util::LockHolder::self(lock_tool_name()));
    if (!taken) throw EnvironmentError(taken.error());
    if (!taken->has_value()) return nullptr;
    return std::make_unique<FlockedEviction>(std::move(**taken));
  }

  std::size_t after_eviction(const Cache& cache, const std::vector<EntryInfo>& entries,
                             util::WallTime now) const override {
    std::size_t removed = 0;
    for (const auto& e : entries) removed += remove_stale_temps(e, now);
    std::ignore = util::write_file_atomic(cache.private_dir() / kEvictionStamp, "");
    std::ignore = util::set_mtime(cache.private_dir() / kEvictionStamp, now);
    return removed;
  }

  bool evicts_after_write(const Cache& cache) const override {
    auto last = util::mtime(cache.private_dir() / kEvictionStamp);
    return !last || cache.clock().now() - *last >= kEvictionInterval;
  }

  std::optional<ClearedLock> clear_eviction_lock(const Cache& cache, bool force) const override {
    fs::path path = cache.private_dir() / kEvictionLock;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
    if (util::remove_lock_file(path, force)) return ClearedLock{path, true};
    if (util::probe_lock(path) != util::LockState::absent) return ClearedLock{path, false};
    return std::nullopt;
  }
};

} // namespace

const KeepingWay& directory_keeping() {
  static const DirectoryKeeping way;
  return way;
}

} // namespace npc::cache
