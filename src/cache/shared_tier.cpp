#include <npc/cache/shared_tier.hpp>

#include <map>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

bool exists_regular(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A file of the mirror, opened in a snapshot, under a new name in `dir` for
// an upload that consumes it: a second link to the same file where the
// kernel allows it (no copy of a big NEFF), else a copy.
Result<fs::path> upload_copy(int fd, const fs::path& dir, std::string_view name) {
  fs::path path = dir / name;
  std::string proc = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) return path;
  util::UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return fail(util::errno_text("cannot create", path, errno));
  if (::lseek(fd, 0, SEEK_SET) != 0) return fail(util::errno_text("cannot read", path, errno));
  if (auto d = util::sha256_fd(fd, out.get()); !d) return fail("cannot copy to " + path.string() + ": " + d.error());
  return path;
}

// Whether the snapshot's record ends with an attempt that failed the graph
// for good in a run of launchers (EntryMeta::failed_for_good_in).
bool failed_for_good_in_a_run(const EntrySnapshot& snapshot) {
  auto it = snapshot.files.find(kMetaFile);
  if (it == snapshot.files.end()) return false;
  auto text = util::read_fd(it->second.get(), kMaxEntryMetaBytes);
  if (!text) return false;
  auto meta = parse_entry_meta(*text);
  if (!meta || meta->attempts.empty()) return false;
  return meta->failed_for_good_in(meta->attempts.back().run) != nullptr;
}

} // namespace

std::string SharedTier::key_of(const CacheKey& key, std::string_view file) const {
  std::string k = key.relative_path().generic_string();
  if (!file.empty()) k += "/" + std::string(file);
  return k;
}

std::string SharedTier::describe(const CacheKey& key) const { return shared_->describe(key_of(key, "")); }

Result<storage::Lock::TakenOrHeld> SharedTier::try_lock(const CacheKey& key) const {
  auto got = storage::Lock::try_acquire(shared_, key_of(key, kFrameworkLockFile),
                                        util::LockHolder::self(lock_tool_name()),
                                        {storage::kLockTtl, mirror_.stale_lock_age()}, std::chrono::system_clock::now());
  if (got)
    if (auto* taken = std::get_if<storage::Lock>(&*got)) taken->keep_renewed();
  return got;
}

Result<std::optional<storage::Lock>> SharedTier::try_create_lock(const CacheKey& key) const {
  auto got = storage::Lock::try_create(shared_, key_of(key, kFrameworkLockFile),
                                       util::LockHolder::self(lock_tool_name()),
                                       {storage::kLockTtl, mirror_.stale_lock_age()}, std::chrono::system_clock::now());
  if (got && *got) (*got)->keep_renewed();
  return got;
}

Result<storage::LockFacts> SharedTier::judge_lock(const CacheKey& key) const {
  return storage::judge_lock(*shared_, key_of(key, kFrameworkLockFile), mirror_.stale_lock_age(),
                             std::chrono::system_clock::now());
}

Result<FetchResult> SharedTier::fetch_result(const CacheKey& key, std::chrono::milliseconds lock_wait,
                                              RecordUse record_it, const std::vector<std::string>* listed) const {
  auto got = cache::fetch_result(*shared_, mirror_, key, {.lock_wait = lock_wait, .failures = true, .listed = listed});
  if (!got) return got;
  if (got->outcome == FetchOutcome::rejected) rejected_.insert(key.str());
  const bool used = got->outcome == FetchOutcome::copied || got->outcome == FetchOutcome::already_done;
  if (used && got->done_there && record_it == RecordUse::yes) record_use(key);
  return got;
}

Result<Brought> SharedTier::bring(const CacheKey& key, const std::vector<std::string>& names) const {
  Brought brought;
  const ListedEntry listed = read_listing(names);
  if (listed.done || listed.failed) {
    auto result = fetch_result(key, std::chrono::milliseconds(0), RecordUse::yes, &names);
    if (!result) return fail(result.error());
    switch (result->outcome) {
    case FetchOutcome::copied:
    case FetchOutcome::failure_copied: brought.downloaded = true; return brought;
    case FetchOutcome::already_done: return brought;
    case FetchOutcome::rejected:
      spdlog::warn("not using {}: {}; compiling it again", describe(key), result->detail);
      break;
    case FetchOutcome::busy:
    case FetchOutcome::miss: break;
    }
  }
  const Entry entry = mirror_.entry(key);
  if (entry.looks_done() || entry.looks_failed()) {
    // Under the shared entry's lock, as a compile's upload: the lock of an
    // upload that died with its process on this host is taken over at once.
    auto got = try_lock(key);
    if (!got) return fail(got.error());
    // Held: another process is compiling or uploading it; the mirror's
    // result serves this host meanwhile.
    if (!std::holds_alternative<storage::Lock>(*got)) return brought;
    if (auto pushed = push(key); !pushed)
      spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", describe(key), pushed.error());
    else
      brought.uploaded = true;
    return brought;
  }
  auto graph = fetch_graph(key);
  if (!graph) return fail(graph.error());
  brought.absent = !*graph;
  if (brought.absent || !listed.has_lock) return brought;
  auto facts = judge_lock(key);
  if (!facts) {
    // As the pool's own look does: a worker meets the same lock, or error.
    spdlog::warn("cannot read the lock of {}: {}; starting its compile", describe(key), facts.error());
    return brought;
  }
  if (facts->blocks()) brought.held_by = facts->holder(); // else gone, or stale: ours to take
  return brought;
}

Found SharedTier::look(const CacheKey& key, bool retry_failed, DownloadResult download) const {
  LockMemo memo;
  return look_all({key}, retry_failed, download, memo, LookListing::each_entry).front();
}

std::vector<Found> SharedTier::look_all(const std::vector<CacheKey>& keys, bool retry_failed,
                                             DownloadResult download, LockMemo& memo, LookListing listing) const {
  // What a listing shows of each entry: its files' names and its lock object.
  struct Listed {
    std::vector<std::string> names;
    std::optional<storage::TreeFile> lock;
    bool looked = false; // its listing came back
  };
  std::map<std::string, Listed> entries; // by the entry's folder key
  auto note = [&](const std::string& folder, const storage::TreeFile& file, std::string name) {
    Listed& entry = entries[folder];
    if (name == kFrameworkLockFile) entry.lock = file;
    entry.names.push_back(std::move(name));
  };
  const std::string version_dir = keys.empty() ? "" : keys.front().relative_path().parent_path().generic_string();
  for (const auto& key : keys)
    if (key.relative_path().parent_path().generic_string() != version_dir) listing = LookListing::each_entry;
  if (listing == LookListing::whole_version_folder) {
    // One walk for every entry (all of one compiler version, as the launcher's are).
    auto tree = shared_->list_tree(version_dir);
    if (!tree) {
      spdlog::warn("cannot look at {}: {}; starting their compiles, which report it if it persists",
                   shared_->describe() + "/" + version_dir, tree.error());
      return std::vector<Found>(keys.size(), Found::pending);
    }
    return look_in_walk(keys, *tree, retry_failed, download, memo);
  }
  for (const auto& key : keys) {
    const std::string folder = key.relative_path().generic_string();
    auto tree = shared_->list_tree(folder);
    if (!tree) {
      spdlog::warn("cannot look at {}: {}; starting its compile, which reports it if it persists", describe(key),
                   tree.error());
      continue;
    }
    entries[folder].looked = true;
    for (const auto& file : *tree)
      if (file.key.find('/') == std::string::npos) note(folder, file, file.key);
  }
  std::vector<Found> found;
  for (const auto& key : keys) {
    const Listed& entry = entries[key.relative_path().generic_string()];
    found.push_back(entry.looked ? judge_listed(key, entry.names, entry.lock, retry_failed, download, memo)
                                 : Found::pending);
  }
  return found;
}

std::vector<Found> SharedTier::look_in_walk(const std::vector<CacheKey>& keys,
                                                 const std::vector<storage::TreeFile>& walk, bool retry_failed,
                                                 DownloadResult download, LockMemo& memo) const {
  struct Listed {
    std::vector<std::string> names;
    std::optional<storage::TreeFile> lock;
  };
  std::map<std::string, Listed> entries; // by the entry's folder name in the version folder
  for (const auto& key : keys) entries[key.relative_path().filename().generic_string()];
  for (const auto& file : walk) {
    auto slash = file.key.find('/');
    if (slash == std::string::npos || file.key.find('/', slash + 1) != std::string::npos) continue;
    auto it = entries.find(file.key.substr(0, slash));
    if (it == entries.end()) continue;
    std::string name = file.key.substr(slash + 1);
    if (name == kFrameworkLockFile) it->second.lock = file;
    it->second.names.push_back(std::move(name));
  }
  std::vector<Found> found;
  for (const auto& key : keys) {
    const Listed& entry = entries[key.relative_path().filename().generic_string()];
    found.push_back(judge_listed(key, entry.names, entry.lock, retry_failed, download, memo));
  }
  return found;
}

Found SharedTier::judge_listed(const CacheKey& key, const std::vector<std::string>& names,
                                    const std::optional<storage::TreeFile>& lock, bool retry_failed,
                                    DownloadResult download, LockMemo& memo) const {
  const ListedEntry listed = read_listing(names);
  if (listed.done && download == DownloadResult::no) return Found::done;
  if (listed.done || (listed.failed && !retry_failed)) {
    auto fetched = fetch_result(key, std::chrono::milliseconds(0), RecordUse::yes, &names);
    if (!fetched) {
      spdlog::warn("cannot download {}: {}; starting its compile, which reports it if it persists", describe(key),
                   fetched.error());
      return Found::pending;
    }
    switch (fetched->outcome) {
    case FetchOutcome::copied:
    case FetchOutcome::already_done: return Found::done;
    case FetchOutcome::failure_copied: return Found::failed;
    case FetchOutcome::busy: return Found::locked;
    case FetchOutcome::rejected:
      // As a wrapper's lookup: an unusable result is compiled again.
      spdlog::warn("not using {}: {}", describe(key), fetched->detail);
      return Found::pending;
    case FetchOutcome::miss: break; // removed since the listing: the lock decides
    }
  }
  const std::string lock_key = key_of(key, kFrameworkLockFile);
  if (!listed.has_lock || !lock) {
    memo.forget(lock_key);
    return Found::pending;
  }
  const auto now = std::chrono::system_clock::now();
  std::optional<storage::LockFacts> facts;
  if (auto judged = memo.find(lock_key, lock->size, lock->modified))
    facts = storage::judge_lock_read(judged->bytes, judged->modified, mirror_.stale_lock_age(), now);
  else {
    // Another object than the one read, if any, is there now.
    memo.forget(lock_key);
    if (memo.presumed_held(lock->modified, now)) {
      spdlog::debug("{} is still held in {}: the lock was written {} ago (presumed held, not read)", key.module_name(),
                    shared_->describe(),
                    util::format_seconds(std::max(0.0, std::chrono::duration<double>(now - lock->modified).count())));
      return Found::held_elsewhere;
    }
  }
  if (!facts) {
    auto read = storage::judge_listed_lock(*shared_, lock_key, lock->size, lock->modified, mirror_.stale_lock_age(), now);
    if (!read) {
      spdlog::warn("cannot read the lock of {}: {}; starting its compile", describe(key), read.error());
      return Found::pending;
    }
    facts = std::move(*read);
    memo.remember(lock_key, *facts);
  }
  if (!facts->blocks()) return Found::pending;
  spdlog::debug("{} is still held in {}: the lock {}", key.module_name(), shared_->describe(), facts->describe());
  return Found::held_elsewhere;
}

std::optional<storage::LockFacts> LockMemo::find(const std::string& lock_key, std::uint64_t size,
                                                 storage::Time modified) const {
  auto it = judged_.find(lock_key);
  if (it == judged_.end() || it->second.bytes.size() != size) return std::nullopt;
  // A listing and a HEAD give the same object's time at different
  // precisions (milliseconds, seconds): the same object within a second.
  const auto apart = modified > it->second.modified ? modified - it->second.modified : it->second.modified - modified;
  if (apart >= std::chrono::seconds(1)) return std::nullopt;
  return it->second;
}

void LockMemo::presume_held_from_now() {
  presume_held_since(std::chrono::system_clock::now() - kPresumeClockMargin);
}

bool LockMemo::presumed_held(storage::Time modified, storage::Time now) const {
  return presume_since_ && modified >= *presume_since_ && modified <= now + std::chrono::seconds(5) &&
         now - modified < kPresumeHeldFor;
}

void LockMemo::remember(const std::string& lock_key, const storage::LockFacts& facts) {
  if (facts.state == storage::LockState::absent) {
    judged_.erase(lock_key);
    return;
  }
  judged_[lock_key] = facts;
}

void LockMemo::forget(const std::string& lock_key) { judged_.erase(lock_key); }

std::optional<storage::Time> LockMemo::lease_ends(const std::string& lock_key) const {
  auto it = judged_.find(lock_key);
  if (it == judged_.end() || !it->second.record || it->second.record->expires_unix <= 0) return std::nullopt;
  return storage::Time(std::chrono::seconds(it->second.record->expires_unix));
}

void SharedTier::record_use(const CacheKey& key) const {
  // Eviction of the shared tier (neuron_cache prune) takes the least recently
  // used first; a use not recorded only makes an entry look older, so a
  // failure here is not the caller's.
  if (auto s = shared_->set_folder_time(key_of(key, ""), std::chrono::system_clock::now()); !s)
    spdlog::debug("cannot record the use of {}: {}", describe(key), s.error());
}

Result<bool> SharedTier::fetch_graph(const CacheKey& key, std::optional<std::string_view> flags_json) const {
  const Entry entry = mirror_.entry(key);
  if (auto s = entry.check_trust(); !s) return fail(s.error());
  if (exists_regular(entry.graph_path()) && exists_regular(entry.dir() / kFlagsFile)) return true;
  if (auto s = util::ensure_dir(entry.dir()); !s) return fail(s.error());
  auto fetched = [&]() -> Result<bool> {
    util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "shared-");
    // Flags first, as Entry::store_graph writes them: the graph is what
    // makes an entry pending.
    IncomingEntry incoming;
    for (auto name : {kFlagsFile, kGraphFile}) {
      fs::path path = work.path() / name;
      if (name == kFlagsFile && flags_json) {
        if (auto s = util::write_file_atomic(path, *flags_json); !s) return fail(s.error());
        incoming.flags = path;
        continue;
      }
      auto got = shared_->read(key_of(key, name), storage::Into::file(path));
      if (!got) return fail(got.error());
      if (!*got) return false;
      (name == kGraphFile ? incoming.graph : incoming.flags) = path;
    }
    for (auto [file, name] : {std::pair{&incoming.flags, kFlagsFile}, std::pair{&incoming.graph, kGraphFile}}) {
      fs::path target = entry.dir() / name;
      if (exists_regular(target)) continue; // first writer wins
      if (::rename((*file)->c_str(), target.c_str()) != 0)
        return fail(util::errno_text("cannot publish", target, errno));
    }
    return true;
  }();
  // Nothing to fetch: no empty entry folder is left behind in the mirror
  // (rmdir leaves one that another process has filled meanwhile).
  if (!fetched || !*fetched) std::ignore = ::rmdir(entry.dir().c_str());
  return fetched;
}

Status SharedTier::push(const CacheKey& key) const {
  auto pushed = push_with(key, false);
  if (!pushed) return fail(pushed.error());
  return ok_status();
}

Status SharedTier::push_over(const CacheKey& key, const std::vector<std::string>& listed) const {
  auto pushed = push_with(key, false, &listed);
  if (!pushed) return fail(pushed.error());
  return ok_status();
}

Result<bool> SharedTier::push_unless_there(const CacheKey& key) const { return push_with(key, true); }

Result<bool> SharedTier::push_as_holder(const CacheKey& key, storage::Lock& lock,
                                        const std::vector<std::string>* listed) const {
  const auto now = std::chrono::system_clock::now();
  if (!lock.lease_lapsed(now)) return push_with(key, false, listed);
  if (auto renewed = lock.renew(now); renewed) {
    spdlog::info("the lock of {} went unrenewed past its expiry and was still this process's: uploading its result",
                 describe(key));
    return push_with(key, false);
  } else {
    spdlog::warn("the lock of {} went unrenewed past its expiry ({}): its result goes up only if no other is there",
                 describe(key), renewed.error());
  }
  return push_with(key, true);
}

Result<bool> SharedTier::push_with(const CacheKey& key, bool keep_theirs, const std::vector<std::string>* listed) const {
  const Entry entry = mirror_.entry(key);
  auto snapshot = Entry::open_snapshot(entry.dir());
  if (!snapshot) return fail(snapshot.error());
  // Pending: nothing to push, but for the record of a graph a launcher of a
  // run failed for good without caching a failure (a timeout): the run's
  // other launchers read it under the lock (cluster/shared_entry_look) and
  // do not compile the graph again.
  const bool run_failure_only = !snapshot->done && !snapshot->failed && failed_for_good_in_a_run(*snapshot);
  if (!snapshot->done && !snapshot->failed && !run_failure_only) return false;
  auto there = listed ? Result<std::vector<std::string>>(*listed) : shared_->list(key_of(key, ""));
  if (!there) return fail(there.error());
  const ListedEntry theirs = read_listing(*there);
  const bool shared_done = theirs.done || theirs.done_without_neff; // the marker is there
  // Someone else's success stands over our failure.
  if (snapshot->failed && shared_done) return false;
  if (keep_theirs && (shared_done || (snapshot->failed && util::contains(*there, kLogFile)))) return false;

  util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "push-");
  auto staged = [&](std::string_view name) -> Result<std::optional<fs::path>> {
    auto it = snapshot->files.find(name);
    if (it == snapshot->files.end()) return std::optional<fs::path>{};
    auto path = upload_copy(it->second.get(), work.path(), name);
    if (!path) return fail(path.error());
    return std::optional<fs::path>(*path);
  };
  EntryResult result;
  for (auto [name, slot] : {std::pair{kFlagsFile, &result.flags}, std::pair{kGraphFile, &result.graph}}) {
    if (util::contains(*there, name)) continue;
    auto path = staged(name);
    if (!path) return fail(path.error());
    *slot = *path;
  }
  if (auto record = staged(kMetaFile); !record) return fail(record.error());
  else if (*record) {
    auto text = util::read_file(**record);
    if (!text) return fail(text.error());
    result.record = std::move(*text);
  }
  if (run_failure_only) {
    if (shared_done) return false; // a result there stands over it
  } else if (snapshot->done) {
    if (shared_done && util::contains(*there, kMetaFile) && !rejected(key)) {
      // The same NEFF there already (another node pushed it): nothing to do,
      // unless its NEFF was found not to match that record (corrupted).
      auto theirs = read_stored_record(*shared_, key_of(key, ""));
      auto ours = read_entry_meta(entry.dir());
      if (theirs && ours && theirs->neff_sha256 && theirs->neff_sha256 == ours->neff_sha256)
        return true;
    }
    auto neff = staged(kNeffFile);
    if (!neff) return fail(neff.error());
    result.neff = *neff;
  } else {
    auto log = staged(kLogFile);
    if (!log) return fail(log.error());
    result.log = *log;
  }
  // What the listing showed absent needs no removal (a request each).
  const MayHold may_hold{.done = shared_done, .log = util::contains(*there, kLogFile), .killed_log = false};
  if (auto s = publish_result(*shared_, key_of(key, ""), result, may_hold); !s) return fail(s.error());
  return true;
}

Status SharedTier::store_graph(const CacheKey& key, std::string_view graph_bytes,
                                const std::vector<std::string>& flags) const {
  const std::string flags_json = serialize_compile_flags(flags);
  for (auto [name, bytes] : {std::pair{kFlagsFile, std::string_view(flags_json)}, std::pair{kGraphFile, graph_bytes}})
    if (auto created = shared_->write(key_of(key, name), bytes, storage::IfPresent::keep); !created) return fail(created.error());
  return ok_status();
}

} // namespace npc::cache
