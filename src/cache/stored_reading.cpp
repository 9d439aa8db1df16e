#include <npc/cache/reading_way.hpp>

#include <chrono>
#include <optional>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

namespace {

// The entries of one walk of `folder` ("" for all).
std::vector<EntryInfo> walk_entries(const Cache& cache, const std::string& folder) {
  const auto now = std::chrono::system_clock::now();
  const storage::Storage& storage = *cache.storage();
  auto files = storage.list_tree(folder);
  if (!files) throw EnvironmentError(files.error());
  auto entries = entries_from_tree(*files, folder);
  for (auto& info : entries) {
    // Rare, so judged (a read) only when a lock object is there. A done
    // entry is done whoever holds its lock, as in a directory.
    if (info.framework_lock.state != storage::LockState::absent && !(info.has_done && info.has_neff)) {
      auto judged = storage::judge_lock(storage, info.dir.generic_string() + "/" + std::string(kFrameworkLockFile),
                                        cache.stale_lock_age(), now);
      if (!judged) throw EnvironmentError(judged.error());
      info.framework_lock = std::move(*judged);
    }
    info.state = state_from_files(info, info.framework_lock.blocks());
  }
  return entries;
}

class StoredReading final : public ReadingWay {
public:
  std::vector<EntryInfo> list(const Cache& cache) const override { return walk_entries(cache, ""); }

  std::vector<EntryInfo> list_version(const Cache& cache, const std::string& compiler_version) const override {
    return walk_entries(cache, std::string(kVersionDirPrefix) + compiler_version);
  }

  CacheCensus census(const Cache& cache) const override {
    CacheCensus census;
    for (const auto& e : walk_entries(cache, "")) census.count(e.state, e.bytes, e.last_used);
    return census;
  }

  Result<EntryInfo> look_again(const Cache&, const Entry& entry, const EntryInfo&) const override {
    return entry.inspect();
  }

  // A listing of the entry's folder; the lock read only when it is there.
  Result<EntryInfo> inspect(const Entry& entry) const override {
    auto files = entry.storage()->list_tree(entry.key());
    if (!files) return fail(files.error());
    auto entries = entries_from_tree(*files, entry.key());
    if (entries.empty()) {
      EntryInfo info;
      info.dir = entry.dir();
      auto key = parse_key(entry.key());
      if (!key) return fail(entry.key() + " is not a cache entry key");
      info.key = *key;
      info.state = EntryState::absent;
      return info;
    }
    EntryInfo info = std::move(entries.front());
    if (info.framework_lock.state != storage::LockState::absent) {
      auto judged = storage::judge_lock(*entry.storage(), entry.key_of(kFrameworkLockFile),
                                        entry.cache().stale_lock_age(), std::chrono::system_clock::now());
      if (!judged) return fail(judged.error());
      info.framework_lock = std::move(*judged);
    }
    info.state = state_from_files(info, !(info.has_done && info.has_neff) && info.framework_lock.blocks());
    return info;
  }

  // The NEFF downloaded and hashed against the record.
  Result<Integrity> verify_neff(const Entry& entry) const override {
    // What the store cannot tell is thrown, not returned: a remote that cannot
    // be read says nothing about the entry, and must not get it demoted.
    auto checked = [](auto result) {
      if (!result) throw EnvironmentError(result.error());
      return std::move(*result);
    };
    std::optional<EntryMeta> record;
    if (auto text = entry.storage()->read(entry.key_of(kMetaFile), kMaxEntryMetaBytes)) {
      auto parsed = parse_entry_meta(*text);
      if (!parsed) return fail("its npc-entry.json is corrupt: " + parsed.error());
      record = std::move(*parsed);
    } else if (checked(entry.storage()->stat(entry.key_of(kMetaFile)))) {
      throw EnvironmentError(text.error());
    }
    if (!record || !record->neff_sha256) return Integrity::unverified;
    // Downloaded into a private scratch folder, hashed, and removed with it.
    util::TempDir scratch(fs::temp_directory_path(), std::string(util::kTempPrefix) + "verify-");
    fs::path neff = scratch.path() / kNeffFile;
    if (!checked(entry.storage()->read(entry.key_of(kNeffFile), storage::Into::file(neff))))
      return fail("done marker without a NEFF");
    auto digest = checked(util::sha256_file(neff));
    if (digest.sha256 != *record->neff_sha256 || (record->neff_bytes && *record->neff_bytes != digest.size))
      return Integrity::mismatch;
    return Integrity::ok;
  }

  bool exists(const Entry& entry) const override {
    auto names = entry.storage()->list(entry.key());
    return !names || !names->empty(); // an unreadable store: the lock attempt says why
  }

  // Graph, flags and record (which says whose words the flags are).
  std::optional<fs::path> local_files(const Cache& cache, const CacheKey& key,
                                      const fs::path& scratch) const override {
    fs::path dir = scratch / key.relative_path();
    if (auto s = util::ensure_dir(dir); !s) throw EnvironmentError(s.error());
    for (auto file : {kGraphFile, kFlagsFile, kMetaFile}) {
      auto got = cache.storage()->read(key.relative_path().generic_string() + "/" + std::string(file),
                                       storage::Into::file(dir / file));
      if (!got) throw EnvironmentError(got.error());
      if (!*got && file == kGraphFile) return std::nullopt;
    }
    return dir;
  }
};

} // namespace

const ReadingWay& stored_reading() {
  static const StoredReading way;
  return way;
}

} // namespace npc::cache
