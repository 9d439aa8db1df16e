#include <npc/cache/entry.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/listing.hpp>
#include <npc/cache/neff_check.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/trust.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/error.hpp>
#include <npc/util/random.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

bool exists_no_follow(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Backoff between attempts to take a held entry: short enough that a waiter
// sees a finished compile quickly, random so that waiters do not move in step.
constexpr auto kMinLockBackoff = std::chrono::milliseconds(5);
constexpr auto kMaxLockBackoff = std::chrono::milliseconds(100);

// A folder made again by taking the lock of an entry removed meanwhile.
bool holds_only_its_lock(const fs::path& entry_dir) {
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(entry_dir, ec))
    if (file.path().filename() != kFrameworkLockFile) return false;
  return !ec;
}

std::string describe_blocking(const fs::path& entry_dir, const storage::LockFacts& blocking) {
  if (blocking.state != storage::LockState::absent)
    return "the lock " + (entry_dir / kFrameworkLockFile).string() + " " + blocking.describe();
  return "another process";
}

} // namespace

std::string_view to_string(EntryState state) {
  switch (state) {
  case EntryState::absent: return "absent";
  case EntryState::pending: return "pending";
  case EntryState::locked: return "locked";
  case EntryState::done: return "done";
  case EntryState::failed: return "failed";
  case EntryState::incomplete: return "incomplete";
  }
  return "?";
}

std::string describe_busy(const fs::path& entry_dir, const LockBusy& busy) {
  std::string text = busy.waited.count() > 0 ? "timed out after " +
                                                   util::format_seconds(static_cast<double>(busy.waited.count()) / 1000.0) +
                                                   " waiting for "
                                             : "another process holds ";
  return text + entry_dir.string() + ", held by " + busy.holder +
         " (if nothing is compiling it, remove the lock with neuron_cache clear-locks)";
}

Entry::Entry(const Cache& cache, fs::path dir, std::string key)
    : cache_(cache), dir_(std::move(dir)), storage_(cache.storage()), key_(std::move(key)) {}

Entry::Entry(const Cache& cache, fs::path dir) : cache_(cache), dir_(std::move(dir)) {
  if (!cache.is_directory()) { // `dir` is the entry's key
    storage_ = cache.storage();
    key_ = dir_.generic_string();
    return;
  }
  fs::path relative = dir_.lexically_relative(cache.root());
  if (!relative.empty() && relative != "." && *relative.begin() != "..") {
    storage_ = cache.storage();
    key_ = relative.generic_string();
  } else {
    // Under another root (the framework's): a storage over its folder.
    storage_ = std::make_shared<storage::LocalStorage>(dir_.parent_path(), cache.private_dir() / kTrashDir);
    key_ = dir_.filename().string();
  }
}

Entry Entry::through(std::shared_ptr<storage::Storage> connection) const {
  Entry other = *this;
  if (storage_ == cache_.storage()) other.storage_ = std::move(connection);
  return other;
}

// --- looking ---------------------------------------------------------------------

Result<EntryInfo> Entry::inspect() const { return cache_.reading().inspect(*this); }

DirStamp dir_stamp_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

EntryState state_from_files(const EntryInfo& entry, bool locked) {
  if (entry.has_done && entry.has_neff) return EntryState::done;
  if (locked) return EntryState::locked;
  if (entry.has_log) return EntryState::failed;
  // A graph without its flags was left by a writer that died: not yet
  // compilable; the next extraction or compile of the graph completes it.
  if (entry.has_graph && entry.has_flags) return EntryState::pending;
  return EntryState::incomplete;
}

bool Entry::exists() const { return cache_.reading().exists(*this); }

std::optional<std::string> Entry::describe_holder() const {
  auto held = holder();
  if (!held) return std::nullopt;
  return std::move(held->described);
}

std::optional<Entry::Holder> Entry::holder() const {
  auto judged = storage::judge_lock(*storage_, key_of(kFrameworkLockFile), cache_.stale_lock_age(),
                                    std::chrono::system_clock::now());
  storage::LockFacts facts = judged ? std::move(*judged) : storage::LockFacts{};
  if (facts.blocks()) {
    std::string lock = "the lock " + storage_->describe(key_of(kFrameworkLockFile)) + ", " +
                       util::format_seconds(facts.age_seconds) +
                       " old";
    // Another host's holder says until when its lease runs: then it lapses
    // unless renewed, and the graph is compiled here.
    if (facts.owner) return Holder{facts.owner->describe(), facts.holder() + " (" + lock + ")"};
    return Holder{std::nullopt, "whoever made " + lock + " (it names no owner)"};
  }
  std::optional<util::LockHolder> owner;
  if (util::probe_lock(lock_path(), &owner) == util::LockState::held) {
    if (owner) return Holder{owner->describe(), owner->describe()};
    return Holder{std::nullopt, "another process"};
  }
  return std::nullopt;
}

bool Entry::looks_done_at(const fs::path& entry_dir) { return cache::looks_done_at(entry_dir); }

bool Entry::looks_failed() const { return looks_failed_at(dir_); }

Result<Integrity> Entry::verify_neff() const { return cache_.reading().verify_neff(*this); }

Result<Integrity> Entry::copy_neff(const fs::path& output) const {
  // Two tries: a NEFF republished between our reads of record and file looks
  // like a mismatch once, never twice.
  for (int attempt = 0; attempt < 2; ++attempt) {
    util::AtomicFile out(output, 0644);
    if (auto s = out.open(); !s) return fail(s.error());
    auto integrity = check_neff_in_place(dir_, cache_.trust(), out.fd());
    if (!integrity) return integrity;
    if (*integrity == Integrity::mismatch) continue;
    if (auto s = out.commit(); !s) return fail(s.error());
    return integrity;
  }
  return Integrity::mismatch;
}

Result<EntrySnapshot> Entry::open_snapshot(const fs::path& entry_dir) {
  const fs::path done_path = done_marker_at(entry_dir);
  for (int attempt = 0; attempt < 5; ++attempt) {
    struct stat done_before {}, done_after {};
    bool had_done = ::lstat(done_path.c_str(), &done_before) == 0;
    if (!had_done && errno != ENOENT) return fail(util::errno_text("cannot read", done_path, errno));
    EntrySnapshot snapshot;
    std::map<std::string, struct stat> opened;
    for (auto name : kTransferFiles) {
      fs::path path = entry_dir / name;
      int fd = util::open_for_reading(path, O_NOFOLLOW);
      if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP) continue; // absent, or a symlink: not ours to follow
        return fail(util::errno_text("cannot open", path, errno));
      }
      util::UniqueFd owned(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) return fail(util::errno_text("cannot stat", path, errno));
      if (!S_ISREG(st.st_mode)) continue;
      opened.emplace(std::string(name), st);
      snapshot.files.emplace(std::string(name), std::move(owned));
    }
    bool has_done = ::lstat(done_path.c_str(), &done_after) == 0;
    bool consistent = had_done == has_done && (!has_done || same_inode(done_before, done_after));
    for (const auto& [name, st] : opened) {
      struct stat now {};
      if (::lstat((entry_dir / name).c_str(), &now) != 0 || !same_inode(now, st)) consistent = false;
    }
    if (!consistent) continue; // published, demoted or removed meanwhile: look again
    snapshot.done = has_done && snapshot.files.contains(kNeffFile);
    snapshot.failed = !has_done && snapshot.files.contains(kLogFile);
    return snapshot;
  }
  return fail("the entry kept changing while it was read");
}

Status Entry::check_trust() const {
  // Who may write a store's objects is its access control: a cache in one
  // is made trusted (store.hpp), as is a directory its user said to trust.
  if (cache_.trust() == TrustMode::trusted) return ok_status();
  for (const fs::path& dir : {dir_.parent_path(), dir_}) {
    if (!exists_no_follow(dir)) continue; // created by us, under the checked root
    if (auto s = check_directory_trust(dir, cache_.trust(), "the cache entry"); !s) return s;
  }
  return ok_status();
}

// --- writing without the lock ----------------------------------------------------

Status Entry::touch() const { return storage_->set_folder_time(key_, cache_.clock().now()); }

Status Entry::store_graph(std::string_view graph_bytes, const std::vector<std::string>& flags) const {
  // compile_flags.json first: the graph is what makes an entry pending, so a
  // writer killed between the two leaves an entry that is not yet one.
  // First writer wins; another rank's identical files are not rewritten.
  const std::string flags_json = serialize_compile_flags(flags);
  for (int attempt = 0;; ++attempt) {
    for (auto [name, bytes] : {std::pair{kFlagsFile, std::string_view(flags_json)}, std::pair{kGraphFile, graph_bytes}})
      if (auto created = storage_->write(key_of(name), bytes, storage::IfPresent::keep); !created) return fail(created.error());
    // An eviction may take the whole entry away between the two (its
    // compile_flags.json found there, the graph then written into a folder
    // made again): the flags are written again, not left missing.
    auto flags_there = storage_->stat(key_of(kFlagsFile));
    if (attempt == 2 || (flags_there && *flags_there)) return ok_status();
  }
}

// --- the lock ------------------------------------------------------------------------

Result<Entry::LockOrBusy> Entry::lock(std::chrono::milliseconds timeout,
                                      const std::function<void(const std::string& holder)>& on_wait,
                                      EntryDir entry_dir) const {
  const bool in_directory = cache_.is_directory();
  if (entry_dir == EntryDir::create && in_directory)
    if (auto s = util::ensure_dir(dir_); !s) return fail(s.error());
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = kMinLockBackoff;
  bool told = false;
  util::LockHolder me = util::LockHolder::self(lock_tool_name());
  for (;;) {
    // Taking the lock creates the folder when it is missing: an entry that
    // must exist is looked for first, and if it went while the lock was
    // taken, the folder holding only our lock is removed again.
    if (entry_dir == EntryDir::must_exist && !exists()) return LockOrBusy(EntryGone{});
    auto attempt = take_lock(me);
    if (!attempt) return fail(attempt.error());
    if (auto* taken = std::get_if<storage::Lock>(&*attempt)) {
      if (entry_dir == EntryDir::must_exist && in_directory && holds_only_its_lock(dir_)) {
        std::ignore = taken->release();
        if (::rmdir(dir_.c_str()) == 0 || errno == ENOENT) return LockOrBusy(EntryGone{});
      }
      // Held for a compile or a copy, maybe for hours: renewed, so that
      // another host sharing the cache sees its holder alive.
      taken->keep_renewed();
      return LockOrBusy(std::move(*taken));
    }
    const auto& blocking = std::get<storage::Lock::Held>(*attempt).facts;
    if (!told && on_wait && timeout.count() > 0) {
      on_wait(describe_blocking(dir_, blocking));
      told = true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return LockOrBusy(LockBusy{describe_blocking(dir_, blocking), timeout});
    std::this_thread::sleep_for(
        std::chrono::milliseconds(util::random_between(kMinLockBackoff.count(), backoff.count())));
    backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxLockBackoff));
  }
}

Result<storage::Lock::TakenOrHeld> Entry::take_lock(const util::LockHolder& me) const {
  return storage::Lock::try_acquire(storage_, key_of(kFrameworkLockFile), me,
                                    {storage::kLockTtl, cache_.stale_lock_age()}, std::chrono::system_clock::now());
}

Result<std::optional<storage::Lock>> Entry::try_lock() const {
  auto attempt = take_lock(util::LockHolder::self(lock_tool_name()));
  if (!attempt) return fail(attempt.error());
  auto* taken = std::get_if<storage::Lock>(&*attempt);
  if (taken == nullptr) return std::optional<storage::Lock>{};
  return std::optional<storage::Lock>(std::move(*taken));
}

Result<bool> Entry::remove() const {
  auto lock_there = storage_->stat(key_of(kFrameworkLockFile));
  if (!lock_there) return fail(lock_there.error());
  if (*lock_there) return false;
  auto lock = try_lock();
  if (!lock) return fail(lock.error());
  if (!lock->has_value()) return false; // a compile is running: never delete it
  // The lock file goes with the folder; our release sees that the path no
  // longer names it and leaves whatever is there now alone.
  auto removed = remove_entry(*storage_, key_);
  std::ignore = (*lock)->release();
  if (!removed) return fail(removed.error());
  return true;
}

} // namespace npc::cache
