#include <npc/cache/remote.hpp>

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

// npc-entry.json is a few KiB.
constexpr std::uint64_t kMaxRecordBytes = 16 * 1024 * 1024;


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

// The remote's integrity record, when it has one and it reads.
Result<std::optional<EntryMeta>> download_record(const storage::Storage& remote, const std::string& key) {
  auto text = remote.read(key, kMaxRecordBytes);
  if (!text) return fail(text.error());
  auto meta = parse_entry_meta(*text);
  if (!meta) return fail("its npc-entry.json is corrupt: " + meta.error());
  return std::optional<EntryMeta>(std::move(*meta));
}

} // namespace

std::string RemoteCache::key_of(const CacheKey& key, std::string_view file) const {
  std::string k = key.relative_path().generic_string();
  if (!file.empty()) k += "/" + std::string(file);
  return k;
}

std::string RemoteCache::describe(const CacheKey& key) const { return remote_->describe(key_of(key, "")); }

Result<storage::Lock::TakenOrHeld> RemoteCache::try_lock(const CacheKey& key) const {
  auto got = storage::Lock::try_acquire(remote_, key_of(key, kFrameworkLockFile),
                                        util::LockHolder::self(lock_tool_name()),
                                        {storage::kLockTtl, mirror_.stale_lock_age()}, std::chrono::system_clock::now());
  if (got)
    if (auto* taken = std::get_if<storage::Lock>(&*got)) taken->keep_renewed();
  return got;
}

Result<storage::LockFacts> RemoteCache::judge_lock(const CacheKey& key) const {
  return storage::judge_lock(*remote_, key_of(key, kFrameworkLockFile), mirror_.stale_lock_age(),
                             std::chrono::system_clock::now());
}

Result<RemoteResult> RemoteCache::fetch_result(const CacheKey& key, std::chrono::milliseconds lock_wait,
                                               RecordUse record_it) const {
  // One listing tells a miss (the usual case) from a result.
  auto names = remote_->list(key_of(key, ""));
  if (!names) return fail(names.error());
  const ListedEntry listed = read_listing(*names);
  const bool done = listed.done;
  const bool failed = listed.failed;
  // The marker is written after the NEFF and removed before it: a marker
  // alone is a result lost, said, and replaced by the compile that follows.
  if (listed.done_without_neff) {
    rejected_.insert(key.str());
    return RemoteResult{RemoteOutcome::rejected, describe(key) + ": model.done is there but model.neff is not"};
  }
  if (!done && !failed) return RemoteResult{};

  const Entry entry = mirror_.entry(key);
  if (auto trusted = entry.check_trust(); !trusted) return RemoteResult{RemoteOutcome::rejected, trusted.error()};
  auto taken = entry.lock(lock_wait);
  if (!taken) return fail(taken.error());
  if (auto* busy = std::get_if<LockBusy>(&*taken))
    return RemoteResult{RemoteOutcome::busy, describe_busy(entry.dir(), *busy)};
  storage::Lock lock = std::move(std::get<storage::Lock>(*taken));
  auto info = entry.inspect();
  if (!info) return fail(info.error());
  if (info->state == EntryState::done) {
    if (done && record_it == RecordUse::yes) record_use(key);
    return RemoteResult{RemoteOutcome::already_done, ""};
  }

  // Staged inside the mirror entry (a temp name its lock holder owns), then
  // published by rename.
  util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "remote-");
  IncomingEntry incoming;
  std::optional<EntryMeta> record;
  if (util::contains(*names, kMetaFile)) {
    auto got = download_record(*remote_, key_of(key, kMetaFile));
    if (!got) {
      rejected_.insert(key.str());
      return RemoteResult{RemoteOutcome::rejected, got.error()};
    }
    record = std::move(*got);
  }
  if (done) {
    fs::path neff = work.path() / kNeffFile;
    auto got = remote_->get_file(key_of(key, kNeffFile), neff);
    if (!got) return fail(got.error());
    if (!*got) return RemoteResult{}; // demoted or removed since the listing
    auto digest = util::sha256_file(neff);
    if (!digest) return fail(digest.error());
    if (record && record->neff_sha256) {
      // Republished between our reads of record and NEFF: the record is
      // read again once before the NEFF is called bad.
      bool matches = *record->neff_sha256 == digest->sha256;
      if (!matches) {
        auto again = download_record(*remote_, key_of(key, kMetaFile));
        if (again && *again && (*again)->neff_sha256 == digest->sha256) {
          record = std::move(*again);
          matches = true;
        }
      }
      if (!matches || (record->neff_bytes && *record->neff_bytes != digest->size)) {
        rejected_.insert(key.str());
        return RemoteResult{RemoteOutcome::rejected, describe(key) + ": its NEFF does not match its integrity record"};
      }
    } else {
      spdlog::debug("{} has no integrity record; recording the hash of the download", describe(key));
    }
    incoming.neff = neff;
    incoming.neff_sha256 = digest->sha256;
    incoming.neff_bytes = digest->size;
  } else {
    fs::path log = work.path() / kLogFile;
    auto got = remote_->get_file(key_of(key, kLogFile), log);
    if (!got) return fail(got.error());
    if (!*got) return RemoteResult{};
    incoming.log = log;
  }
  if (record) incoming.attempts = record->attempts;
  for (auto name : {kGraphFile, kFlagsFile}) {
    if (!util::contains(*names, name) || exists_regular(entry.dir() / name)) continue;
    fs::path path = work.path() / name;
    auto got = remote_->get_file(key_of(key, name), path);
    if (!got) return fail(got.error());
    if (*got) (name == kGraphFile ? incoming.graph : incoming.flags) = path;
  }
  if (auto s = entry.publish_incoming(incoming); !s) return fail(s.error());
  if (done && record_it == RecordUse::yes) record_use(key);
  return RemoteResult{done ? RemoteOutcome::copied : RemoteOutcome::failure_copied, ""};
}

void RemoteCache::record_use(const CacheKey& key) const {
  // Eviction of the remote (neuron_cache prune) takes the least recently
  // used first; a use not recorded only makes an entry look older, so a
  // failure here is not the caller's.
  if (auto s = remote_->set_last_use(key_of(key, ""), std::chrono::system_clock::now()); !s)
    spdlog::debug("cannot record the use of {}: {}", describe(key), s.error());
}

Result<bool> RemoteCache::fetch_graph(const CacheKey& key) const {
  const Entry entry = mirror_.entry(key);
  if (auto s = entry.check_trust(); !s) return fail(s.error());
  if (exists_regular(entry.graph_path()) && exists_regular(entry.dir() / kFlagsFile)) return true;
  if (auto s = util::ensure_dir(entry.dir()); !s) return fail(s.error());
  auto fetched = [&]() -> Result<bool> {
    util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "remote-");
    // Flags first, as Entry::store_graph writes them: the graph is what
    // makes an entry pending.
    IncomingEntry incoming;
    for (auto name : {kFlagsFile, kGraphFile}) {
      fs::path path = work.path() / name;
      auto got = remote_->get_file(key_of(key, name), path);
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

Status RemoteCache::push(const CacheKey& key) const {
  auto pushed = push_with(key, false);
  if (!pushed) return fail(pushed.error());
  return ok_status();
}

Result<bool> RemoteCache::push_unless_there(const CacheKey& key) const { return push_with(key, true); }

Result<bool> RemoteCache::push_with(const CacheKey& key, bool keep_theirs) const {
  const Entry entry = mirror_.entry(key);
  auto snapshot = Entry::open_snapshot(entry.dir());
  if (!snapshot) return fail(snapshot.error());
  if (!snapshot->done && !snapshot->failed) return false;
  auto there = remote_->list(key_of(key, ""));
  if (!there) return fail(there.error());
  const ListedEntry theirs = read_listing(*there);
  const bool remote_done = theirs.done || theirs.done_without_neff; // the marker is there
  // Someone else's success stands over our failure.
  if (snapshot->failed && remote_done) return false;
  if (keep_theirs && (remote_done || (snapshot->failed && util::contains(*there, kLogFile)))) return false;

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
  if (snapshot->done) {
    if (remote_done && util::contains(*there, kMetaFile) && !rejected(key)) {
      // The same NEFF there already (another node pushed it): nothing to do,
      // unless its NEFF was found not to match that record (corrupted).
      auto theirs = download_record(*remote_, key_of(key, kMetaFile));
      auto ours = read_entry_meta(entry.dir());
      if (theirs && *theirs && ours && (*theirs)->neff_sha256 && (*theirs)->neff_sha256 == ours->neff_sha256)
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
  const MayHold may_hold{.done = remote_done, .log = util::contains(*there, kLogFile), .killed_log = false};
  if (auto s = publish_result(*remote_, key_of(key, ""), result, may_hold); !s) return fail(s.error());
  return true;
}

Status RemoteCache::store_graph(const CacheKey& key, std::string_view graph_bytes,
                                const std::vector<std::string>& flags) const {
  const std::string flags_json = serialize_compile_flags(flags);
  for (auto [name, bytes] : {std::pair{kFlagsFile, std::string_view(flags_json)}, std::pair{kGraphFile, graph_bytes}})
    if (auto created = remote_->create_exclusive(key_of(key, name), bytes); !created) return fail(created.error());
  return ok_status();
}

} // namespace npc::cache
