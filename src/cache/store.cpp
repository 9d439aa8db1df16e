#include <npc/cache/store.hpp>

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/parallel.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

std::string& tool_name_storage() {
  static std::string name = "npc";
  return name;
}

util::WallTime to_wall_time(const struct timespec& ts) {
  using namespace std::chrono;
  return util::WallTime(duration_cast<util::WallTime::duration>(seconds(ts.tv_sec) +
                                                                nanoseconds(ts.tv_nsec)));
}

// Lists the names in a directory (no "." or ".."); empty when unreadable.
std::vector<std::string> read_names(const fs::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

std::string random_tag() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(::getpid()) + "." + std::to_string(rng() % 1000000000ULL);
}

} // namespace

void set_lock_tool_name(std::string name) { tool_name_storage() = std::move(name); }
const std::string& lock_tool_name() { return tool_name_storage(); }

std::string_view to_string(EntryState state) {
  switch (state) {
  case EntryState::pending: return "pending";
  case EntryState::locked: return "locked";
  case EntryState::done: return "done";
  case EntryState::failed: return "failed";
  case EntryState::incomplete: return "incomplete";
  }
  return "?";
}

Cache::Cache(fs::path root, const util::Clock& clock)
    : Cache(std::move(root), trust_mode_from_environment(), clock) {}

Cache::Cache(fs::path root, TrustMode trust, const util::Clock& clock)
    : root_(std::move(root)), trust_(trust), clock_(clock) {}

fs::path Cache::private_dir() const { return root_ / kPrivateDir; }

Status Cache::ensure_root() const {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    if (root_.has_parent_path())
      if (auto s = util::ensure_dir(root_.parent_path(), 0755); !s) return s;
    // The cache holds code that will run on the accelerator: private to the
    // user unless a shared cache is set up on purpose.
    if (::mkdir(root_.c_str(), 0700) != 0) {
      if (errno != EEXIST)
        return fail(util::errno_text("cannot create the cache directory", root_, errno) +
                    " (set --cache_dir in NEURON_CC_FLAGS to a writable place)");
    } else if (::chmod(root_.c_str(), root_mode(trust_)) != 0) { // exact mode, whatever the umask
      return fail(util::errno_text("cannot set the mode of", root_, errno));
    }
  }
  if (!fs::is_directory(root_, ec))
    return fail("the cache path " + root_.string() + " exists and is not a directory");
  if (auto s = check_directory_trust(root_, trust_, "the cache directory"); !s) return s;
  // Below the root, modes follow the umask: the root alone decides who gets in.
  if (auto s = util::ensure_dir(private_dir()); !s) return s;
  return ok_status();
}

Result<EntryInfo> Cache::inspect(const fs::path& dir) const {
  EntryInfo info;
  info.dir = dir;
  auto key = parse_key(dir.string());
  if (!key) return fail(dir.string() + " is not a cache entry directory");
  info.key = *key;
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0) return fail(util::errno_text("cannot open cache entry", dir, errno));
  util::UniqueFd dir_fd(dfd);
  struct stat dir_stat {};
  if (::fstat(dfd, &dir_stat) != 0) return fail(util::errno_text("cannot stat", dir, errno));
  info.last_used = to_wall_time(dir_stat.st_mtim);

  DIR* d = ::fdopendir(::dup(dfd));
  if (d == nullptr) return fail(util::errno_text("cannot read cache entry", dir, errno));
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // raced away
    if (S_ISREG(st.st_mode)) info.bytes += static_cast<std::uint64_t>(st.st_size);
    if (util::is_temp_name(name)) info.temp_files.emplace_back(name);
    else if (name == kGraphFile) {
      info.has_graph = S_ISREG(st.st_mode);
      info.graph_bytes = static_cast<std::uint64_t>(st.st_size);
    } else if (name == kNeffFile) {
      info.has_neff = S_ISREG(st.st_mode);
      // The framework loads NEFFs without telling us; its reads move the
      // NEFF's atime (relatime: at least once a day), so last use is the
      // later of that and the mark we set on our hits.
      if (info.has_neff) info.last_used = std::max(info.last_used, to_wall_time(st.st_atim));
    }
    else if (name == kDoneFile) info.has_done = true;
    else if (name == kLogFile) info.has_log = true;
    else if (name == kFlagsFile) info.has_flags = true;
    else if (name == kLockFile) info.has_lock_file = true;
    else if (name == kFrameworkLockFile) info.framework_lock.state = FrameworkLockState::held;
  }
  ::closedir(d);
  // Rare, so judged (read, liveness) only when the file is there.
  if (info.framework_lock.state != FrameworkLockState::absent)
    info.framework_lock = judge_framework_lock(dir / kFrameworkLockFile, stale_lock_age_,
                                               std::chrono::system_clock::now());

  // A done entry is done whoever holds its lock (a compile that found it
  // done and is about to leave), so only the others need the probe.
  bool done = info.has_done && info.has_neff;
  bool locked = !done && (info.framework_lock.blocks() ||
                          (info.has_lock_file && util::probe_lock(lock_path(dir)) == util::LockState::held));
  if (done) info.state = EntryState::done;
  else if (locked) info.state = EntryState::locked;
  else if (info.has_log) info.state = EntryState::failed;
  // A graph without its flags was left by a writer that died: not yet
  // compilable; the next extraction or compile of the graph completes it.
  else if (info.has_graph && info.has_flags) info.state = EntryState::pending;
  else info.state = EntryState::incomplete;
  return info;
}

std::vector<EntryInfo> Cache::list_version(const std::string& compiler_version) const {
  fs::path version_dir = root_ / (std::string(kVersionDirPrefix) + compiler_version);
  std::vector<std::string> modules;
  for (auto& module : read_names(version_dir)) {
    std::string g, f;
    if (parse_module_name(module, g, f)) modules.push_back(std::move(module));
  }
  // Each entry costs a directory read and a stat per file, all waiting on
  // the kernel: a big cache (100,000 entries) is read by several threads.
  std::vector<std::optional<EntryInfo>> found(modules.size());
  util::parallel_ranges(modules.size(), 2048, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      if (auto info = inspect(version_dir / modules[i])) found[i] = std::move(*info);
  });
  std::vector<EntryInfo> entries;
  entries.reserve(modules.size());
  for (auto& info : found)
    if (info) entries.push_back(std::move(*info));
  return entries;
}

std::vector<EntryInfo> Cache::list() const {
  std::vector<EntryInfo> entries;
  for (const auto& name : read_names(root_)) {
    if (!std::string_view(name).starts_with(kVersionDirPrefix)) continue;
    std::string version = name.substr(kVersionDirPrefix.size());
    if (!valid_compiler_version(version)) continue;
    auto more = list_version(version);
    entries.insert(entries.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
  }
  return entries;
}

namespace {

// Reads the NEFF once, hashing it, optionally copying it to `copy_to`.
Result<Integrity> check_neff(const fs::path& entry_dir, TrustMode trust, int copy_to) {
  if (auto s = check_directory_trust(entry_dir, trust, "the cache entry"); !s) return fail(s.error());
  auto meta = read_entry_meta(entry_dir);
  if (!meta) return fail(meta.error());
  fs::path neff = entry_dir / kNeffFile;
  util::UniqueFd fd(::open(neff.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return fail(util::errno_text("cannot open", neff, errno));
  if (meta->neff_bytes) {
    // Cheap check first: a truncated NEFF is caught without reading it.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail(util::errno_text("cannot stat", neff, errno));
    if (static_cast<std::uint64_t>(st.st_size) != *meta->neff_bytes) return Integrity::mismatch;
  }
  auto digest = util::sha256_fd(fd.get(), copy_to);
  if (!digest) return fail("cannot read " + neff.string() + ": " + digest.error());
  if (!meta->neff_sha256) return Integrity::unverified;
  if (digest->sha256 != *meta->neff_sha256) return Integrity::mismatch;
  if (meta->neff_bytes && digest->size != *meta->neff_bytes) return Integrity::mismatch;
  return Integrity::ok;
}

} // namespace

Result<Integrity> Cache::verify_neff(const fs::path& entry_dir) const {
  auto first = check_neff(entry_dir, trust_, -1);
  if (first && *first == Integrity::mismatch) return check_neff(entry_dir, trust_, -1); // republished meanwhile?
  return first;
}

Result<Integrity> Cache::copy_neff(const fs::path& entry_dir, const fs::path& output) const {
  // Two tries: a NEFF republished between our reads of record and file looks
  // like a mismatch once, never twice.
  for (int attempt = 0; attempt < 2; ++attempt) {
    util::AtomicFile out(output, 0644);
    if (auto s = out.open(); !s) return fail(s.error());
    auto integrity = check_neff(entry_dir, trust_, out.fd());
    if (!integrity) return integrity;
    if (*integrity == Integrity::mismatch) continue;
    if (auto s = out.commit(); !s) return fail(s.error());
    return integrity;
  }
  return Integrity::mismatch;
}

Status Cache::touch(const fs::path& entry_dir) const { return util::set_mtime(entry_dir, clock_.now()); }

Status Cache::store_graph(const fs::path& entry_dir, std::string_view graph_bytes,
                          const std::vector<std::string>& flags) const {
  if (auto s = util::ensure_dir(entry_dir); !s) return s;
  std::error_code ec;
  // compile_flags.json first: the graph is what makes an entry pending, so a
  // writer killed between the two leaves an entry that is not yet one.
  // First writer wins; another rank's identical files are not rewritten.
  if (!fs::exists(entry_dir / kFlagsFile, ec)) {
    auto s = util::write_file_atomic(entry_dir / kFlagsFile, serialize_compile_flags(flags),
                                     util::Overwrite::no);
    if (!s && !fs::exists(entry_dir / kFlagsFile, ec)) return s;
  }
  if (!fs::exists(entry_dir / kGraphFile, ec)) {
    auto s = util::write_file_atomic(entry_dir / kGraphFile, graph_bytes, util::Overwrite::no);
    if (!s && !fs::exists(entry_dir / kGraphFile, ec)) return s;
  }
  return ok_status();
}

fs::path Cache::lock_path(const fs::path& entry_dir) const { return entry_dir / kLockFile; }

fs::path Cache::framework_lock_path(const fs::path& entry_dir) const { return entry_dir / kFrameworkLockFile; }

namespace {
// Backoff between attempts to take a held entry: short enough that a waiter
// sees a finished compile quickly, random so that waiters do not move in step.
constexpr auto kMinLockBackoff = std::chrono::milliseconds(5);
constexpr auto kMaxLockBackoff = std::chrono::milliseconds(100);

std::string describe_holder(const fs::path& entry_dir, const EntryLock::Attempt& attempt) {
  if (attempt.blocking.state != FrameworkLockState::absent)
    return "the lock " + (entry_dir / kFrameworkLockFile).string() + " " + attempt.blocking.describe();
  std::optional<util::LockHolder> holder;
  std::ignore = util::probe_lock(entry_dir / kLockFile, &holder);
  return holder ? holder->describe() : std::string("another process");
}
} // namespace

Result<EntryLock>
Cache::lock_entry(const fs::path& entry_dir, std::chrono::milliseconds timeout,
                  const std::function<void(const std::string& holder)>& on_wait) const {
  if (auto s = util::ensure_dir(entry_dir); !s) return fail(s.error());
  thread_local std::mt19937 rng{std::random_device{}()};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = kMinLockBackoff;
  bool told = false;
  util::LockHolder me = util::LockHolder::self(lock_tool_name());
  for (;;) {
    EntryLock lock;
    auto attempt = EntryLock::try_acquire(entry_dir, me, stale_lock_age_, lock);
    if (!attempt) return fail(attempt.error());
    if (attempt->outcome == EntryLock::Outcome::taken) return lock;
    if (!told && on_wait) {
      on_wait(describe_holder(entry_dir, *attempt));
      told = true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return fail("timed out after " + util::format_seconds(static_cast<double>(timeout.count()) / 1000.0) +
                  " waiting for " + entry_dir.string() + ", held by " + describe_holder(entry_dir, *attempt) +
                  " (if nothing is compiling it, remove the lock with neuron_cache clear-locks)");
    std::uniform_int_distribution<long> jitter(kMinLockBackoff.count(), backoff.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxLockBackoff));
  }
}

Result<std::optional<EntryLock>> Cache::try_lock_entry(const fs::path& entry_dir) const {
  EntryLock lock;
  auto attempt = EntryLock::try_acquire(entry_dir, util::LockHolder::self(lock_tool_name()), stale_lock_age_, lock);
  if (!attempt) return fail(attempt.error());
  if (attempt->outcome != EntryLock::Outcome::taken) return std::optional<EntryLock>{};
  return std::optional<EntryLock>(std::move(lock));
}

Status Cache::publish_success(const fs::path& entry_dir, const fs::path& neff,
                              const AttemptRecord& attempt) const {
  auto digest = util::sha256_file(neff);
  if (!digest) return fail(digest.error());
  auto meta = read_entry_meta(entry_dir);
  EntryMeta record = meta ? std::move(*meta) : EntryMeta{};
  record.neff_sha256 = digest->sha256;
  record.neff_bytes = digest->size;
  std::error_code ec;
  record.graph_bytes = fs::file_size(entry_dir / kGraphFile, ec);
  if (ec) record.graph_bytes = 0;
  record.attempts.push_back(attempt);
  // The compiler chose the NEFF's mode; the cache's is 0666 less the umask,
  // like every other file in it (group-writable in a shared cache).
  mode_t mask = ::umask(0);
  ::umask(mask);
  std::ignore = ::chmod(neff.c_str(), 0666 & ~mask);
  // A previous done marker must go before the NEFF it vouched for changes.
  std::ignore = ::unlink((entry_dir / kDoneFile).c_str());
  if (::rename(neff.c_str(), (entry_dir / kNeffFile).c_str()) != 0)
    return fail(util::errno_text("cannot publish", entry_dir / kNeffFile, errno));
  if (auto s = write_entry_meta(entry_dir, record); !s) return s;
  if (auto s = util::write_file_atomic(entry_dir / kDoneFile, ""); !s) return s;
  std::ignore = ::unlink((entry_dir / kLogFile).c_str());
  std::ignore = ::unlink((entry_dir / kKilledLogFile).c_str());
  return touch(entry_dir);
}

Status Cache::publish_failure(const fs::path& entry_dir, const fs::path& log,
                              const AttemptRecord& attempt) const {
  auto meta = read_entry_meta(entry_dir);
  EntryMeta record = meta ? std::move(*meta) : EntryMeta{};
  record.attempts.push_back(attempt);
  if (auto s = write_entry_meta(entry_dir, record); !s) return s;
  if (::rename(log.c_str(), (entry_dir / kLogFile).c_str()) != 0)
    return fail(util::errno_text("cannot publish", entry_dir / kLogFile, errno));
  return touch(entry_dir);
}

Status Cache::record_killed(const fs::path& entry_dir, const fs::path& log,
                            const AttemptRecord& attempt) const {
  auto meta = read_entry_meta(entry_dir);
  EntryMeta record = meta ? std::move(*meta) : EntryMeta{};
  record.attempts.push_back(attempt);
  if (auto s = write_entry_meta(entry_dir, record); !s) return s;
  if (::rename(log.c_str(), (entry_dir / kKilledLogFile).c_str()) != 0)
    return fail(util::errno_text("cannot keep the log as", entry_dir / kKilledLogFile, errno));
  return ok_status();
}

Status Cache::demote(const fs::path& entry_dir) const {
  if (::unlink((entry_dir / kDoneFile).c_str()) != 0 && errno != ENOENT)
    return fail(util::errno_text("cannot remove", entry_dir / kDoneFile, errno));
  if (::unlink((entry_dir / kNeffFile).c_str()) != 0 && errno != ENOENT)
    return fail(util::errno_text("cannot remove", entry_dir / kNeffFile, errno));
  auto meta = read_entry_meta(entry_dir);
  EntryMeta record = meta ? std::move(*meta) : EntryMeta{};
  record.neff_sha256.reset();
  record.neff_bytes.reset();
  return write_entry_meta(entry_dir, record);
}

Status Cache::clear_failure(const fs::path& entry_dir) const {
  if (::unlink((entry_dir / kLogFile).c_str()) != 0 && errno != ENOENT)
    return fail(util::errno_text("cannot remove", entry_dir / kLogFile, errno));
  return ok_status();
}

Result<bool> Cache::remove_entry(const fs::path& entry_dir) const {
  struct stat st {};
  if (::lstat(framework_lock_path(entry_dir).c_str(), &st) == 0) return false;
  auto lock = try_lock_entry(entry_dir);
  if (!lock) return fail(lock.error());
  if (!lock->has_value()) return false; // a compile is running: never delete it
  fs::path trash = private_dir() / kTrashDir;
  if (auto s = util::ensure_dir(trash); !s) return fail(s.error());
  fs::path target = trash / (entry_dir.filename().string() + "." + random_tag());
  // The lock file moves with the directory; our release sees that the path
  // no longer names it and leaves whatever is there now alone.
  if (::rename(entry_dir.c_str(), target.c_str()) != 0)
    return fail(util::errno_text("cannot remove cache entry", entry_dir, errno));
  (*lock)->release();
  if (auto s = util::remove_tree(target); !s) spdlog::warn("{}", s.error());
  return true;
}

void Cache::empty_trash() const {
  fs::path trash = private_dir() / kTrashDir;
  for (const auto& name : read_names(trash)) std::ignore = util::remove_tree(trash / name);
}

} // namespace npc::cache
