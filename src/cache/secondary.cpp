#include <npc/cache/secondary.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/entry.hpp>
#include <npc/cache/layout.hpp>
#include <npc/config/neuron_cc_flags.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

std::optional<fs::path> resolve_secondary_root(std::string_view value) {
  if (util::trim(value).empty()) return std::nullopt;
  std::error_code ec;
  fs::path root = fs::absolute(fs::path(std::string(value)), ec).lexically_normal();
  if (ec) root = fs::path(std::string(value));
  if (fs::is_directory(root / config::kCacheDirName, ec)) root /= config::kCacheDirName;
  return root;
}

std::optional<fs::path> secondary_root_from_environment() {
  auto value = util::env(kSecondaryCacheEnv);
  if (!value) return std::nullopt;
  return resolve_secondary_root(*value);
}

namespace {

bool is_regular_following_links(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Copies an open file into `dir`/`name` (a new file), hashing it on the way;
// `failed_side` tells a bad source from a bad destination.
Result<util::FileDigest> copy_into(int from, const fs::path& dir, std::string_view name, util::IoSide& failed_side) {
  fs::path path = dir / name;
  failed_side = util::IoSide::write;
  util::UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (!out.valid()) return fail(util::errno_text("cannot create", path, errno));
  auto digest = util::sha256_fd(from, out.get(), &failed_side);
  if (!digest) return fail("cannot copy to " + path.string() + ": " + digest.error());
  if (::close(out.release()) != 0) return fail(util::errno_text("cannot write", path, errno));
  return digest;
}

} // namespace

SecondaryResult fetch_from_secondary(const Cache& local, const fs::path& secondary_root, const CacheKey& key,
                                     std::chrono::milliseconds lock_wait) {
  const fs::path remote = secondary_root / key.relative_path();
  // The cheap look first: most misses end here, with nothing created locally.
  if (!Entry::looks_done_at(remote)) return {};
  std::error_code ec;
  if (fs::equivalent(secondary_root, local.root(), ec)) return {};

  const Entry entry = local.entry(key);
  // Nothing is written into a local entry the trust check refuses.
  if (auto trusted = entry.check_trust(); !trusted) return {SecondaryOutcome::rejected, trusted.error()};
  auto taken = entry.lock(lock_wait);
  if (!taken) throw EnvironmentError(taken.error());
  if (auto* busy = std::get_if<LockBusy>(&*taken)) return {SecondaryOutcome::busy, describe_busy(entry.dir(), *busy)};
  storage::Lock lock = std::move(std::get<storage::Lock>(*taken));
  auto info = entry.inspect();
  if (!info) throw EnvironmentError(info.error());
  if (info->state == EntryState::done) return {SecondaryOutcome::already_done, ""};

  // Every read below goes through descriptors of one published state of the
  // remote entry; nothing there is opened for writing.
  auto snapshot = Entry::open_snapshot(remote);
  if (!snapshot) return {SecondaryOutcome::rejected, snapshot.error()};
  if (!snapshot->done) return {}; // demoted or removed since the first look
  std::optional<EntryMeta> record;
  if (auto it = snapshot->files.find(kMetaFile); it != snapshot->files.end()) {
    auto text = util::read_fd(it->second.get(), 16 * 1024 * 1024) /* a record is a few KiB */;
    if (!text) return {SecondaryOutcome::rejected, "cannot read its npc-entry.json: " + text.error()};
    auto meta = parse_entry_meta(*text);
    if (!meta) return {SecondaryOutcome::rejected, "its npc-entry.json is corrupt: " + meta.error()};
    record = std::move(*meta);
  }

  // Staged inside the local entry (same filesystem, a temp name eviction
  // recognises), then published by rename.
  util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "secondary-");
  util::IoSide failed_side = util::IoSide::write;
  auto neff = copy_into(snapshot->files.find(kNeffFile)->second.get(), work.path(), kNeffFile, failed_side);
  if (!neff) {
    // Reading the secondary failed (it is remote, maybe); writing here failing
    // is ours to report.
    if (failed_side == util::IoSide::read) return {SecondaryOutcome::rejected, neff.error()};
    throw EnvironmentError(neff.error());
  }
  if (record && record->neff_sha256) {
    if (*record->neff_sha256 != neff->sha256 || (record->neff_bytes && *record->neff_bytes != neff->size))
      return {SecondaryOutcome::rejected, "its NEFF does not match its integrity record"};
  } else {
    spdlog::debug("{} in the secondary cache has no integrity record; recording the hash of the copy",
                  remote.string());
  }

  IncomingEntry incoming;
  incoming.neff = work.path() / kNeffFile;
  incoming.neff_sha256 = neff->sha256;
  incoming.neff_bytes = neff->size;
  if (record) incoming.attempts = record->attempts;
  for (auto name : {kGraphFile, kFlagsFile}) {
    auto it = snapshot->files.find(name);
    if (it == snapshot->files.end() || is_regular_following_links(entry.dir() / name)) continue;
    auto copied = copy_into(it->second.get(), work.path(), name, failed_side);
    if (!copied) continue; // the NEFF is what is served; the entry's graph can come later
    (name == kGraphFile ? incoming.graph : incoming.flags) = work.path() / name;
  }
  if (auto s = entry.publish_incoming(incoming); !s) throw EnvironmentError(s.error());
  return {SecondaryOutcome::copied, ""};
}

} // namespace npc::cache
