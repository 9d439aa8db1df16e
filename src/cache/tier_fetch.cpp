#include <npc/cache/tier_fetch.hpp>

#include <optional>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

namespace {

bool is_regular_here(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

FetchResult rejected(std::string why) { return {FetchOutcome::rejected, std::move(why), false}; }

} // namespace

Result<EntryMeta> read_stored_record(const storage::Storage& storage, const std::string& entry_key) {
  auto text = storage.read(entry_key + "/" + std::string(kMetaFile), kMaxEntryMetaBytes);
  if (!text) return fail(text.error());
  auto meta = parse_entry_meta(*text);
  if (!meta) return fail("its npc-entry.json is corrupt: " + meta.error());
  return meta;
}

namespace {

// `stale` is set when the caller's listing (options.listed) named files
// that are gone: the result is then to be looked for again.
Result<FetchResult> fetch_listed(const storage::Storage& from, const Cache& into, const CacheKey& key,
                                 const FetchOptions& options, bool& stale) {
  const std::string folder = key.relative_path().generic_string();
  auto file_key = [&](std::string_view name) { return folder + "/" + std::string(name); };
  const bool callers = options.listed != nullptr;
  auto stale_listing = [&] {
    stale = true;
    return FetchResult{};
  };
  auto names = callers ? Result<std::vector<std::string>>(*options.listed) : from.list(folder);
  if (!names) return fail(names.error());
  const ListedEntry listed = read_listing(*names);
  // The marker is written after the NEFF and removed before it: a marker
  // alone is a result lost.
  if (listed.done_without_neff) return rejected(from.describe(folder) + ": model.done is there but model.neff is not");
  const bool failed = listed.failed && options.failures;
  if (!listed.done && !failed) return FetchResult{};

  const Entry entry = into.entry(key);
  if (auto trusted = entry.check_trust(); !trusted) return rejected(trusted.error());
  auto taken = entry.lock(options.lock_wait);
  if (!taken) return fail(taken.error());
  if (auto* busy = std::get_if<LockBusy>(&*taken))
    return FetchResult{FetchOutcome::busy, describe_busy(entry.dir(), *busy), listed.done};
  storage::Lock lock = std::move(std::get<storage::Lock>(*taken));
  auto info = entry.inspect();
  if (!info) return fail(info.error());
  if (info->state == EntryState::done) return FetchResult{FetchOutcome::already_done, "", listed.done};

  // Staged inside this cache's entry (a temp name its lock holder owns, and
  // eviction recognises), then published by rename.
  util::TempDir work(entry.dir(), std::string(util::kTempPrefix) + "fetch-");
  IncomingEntry incoming;
  std::optional<EntryMeta> record;
  if (util::contains(*names, kMetaFile)) {
    auto got = read_stored_record(from, folder);
    if (!got && callers) return stale_listing(); // republished since, perhaps
    if (!got) return rejected(got.error());
    record = std::move(*got);
  }
  if (listed.done) {
    fs::path neff = work.path() / kNeffFile;
    auto got = from.read(file_key(kNeffFile), storage::Into::file(neff));
    if (!got) return fail(got.error());
    if (!*got && callers) return stale_listing();
    if (!*got) return FetchResult{}; // demoted or removed since the listing
    auto digest = util::sha256_file(neff);
    if (!digest) return fail(digest.error());
    if (record && record->neff_sha256) {
      bool matches = *record->neff_sha256 == digest->sha256;
      if (!matches) {
        auto again = read_stored_record(from, folder);
        if (again && again->neff_sha256 == digest->sha256) {
          record = std::move(*again);
          matches = true;
        }
      }
      if (!matches || (record->neff_bytes && *record->neff_bytes != digest->size))
        return rejected(from.describe(folder) + ": its NEFF does not match its integrity record");
    } else {
      spdlog::debug("{} has no integrity record; recording the hash of the copy", from.describe(folder));
    }
    incoming.neff = neff;
    incoming.neff_sha256 = digest->sha256;
    incoming.neff_bytes = digest->size;
  } else {
    fs::path log = work.path() / kLogFile;
    auto got = from.read(file_key(kLogFile), storage::Into::file(log));
    if (!got) return fail(got.error());
    if (!*got && callers) return stale_listing();
    if (!*got) return FetchResult{};
    incoming.log = log;
  }
  if (record) incoming.attempts = record->attempts;
  for (auto name : {kGraphFile, kFlagsFile}) {
    if (!util::contains(*names, name) || is_regular_here(entry.dir() / name)) continue;
    fs::path path = work.path() / name;
    auto got = from.read(file_key(name), storage::Into::file(path));
    if (!got) return fail(got.error());
    if (*got) (name == kGraphFile ? incoming.graph : incoming.flags) = path;
  }
  if (auto s = entry.publish_incoming(incoming); !s) return fail(s.error());
  return FetchResult{listed.done ? FetchOutcome::copied : FetchOutcome::failure_copied, "", listed.done};
}

} // namespace

Result<FetchResult> fetch_result(const storage::Storage& from, const Cache& into, const CacheKey& key,
                                 const FetchOptions& options) {
  bool stale = false;
  auto got = fetch_listed(from, into, key, options, stale);
  if (!got || !stale) return got;
  // The caller's listing is out of date (this cache's lock released): look
  // again, as a fetch of our own would have.
  FetchOptions fresh = options;
  fresh.listed = nullptr;
  return fetch_listed(from, into, key, fresh, stale);
}

} // namespace npc::cache
