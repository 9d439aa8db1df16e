#include <npc/cache/reading_way.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/neff_check.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/summary.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/parallel.hpp>

namespace npc::cache {

namespace {

// One version directory read with the help of its summary: each entry is
// either recalled (its record held) or inspected.
struct VersionScan {
  std::string version_key;
  fs::path version_dir;
  std::vector<std::string> modules;
  VersionSummary summary;
  std::vector<std::optional<RecalledEntry>> recalled; // by module
  std::vector<std::size_t> inspected_modules;          // the others' indexes
  std::vector<EntryInfo> inspected;                    // and what inspect() found (absent included)
};

std::vector<std::string> version_names(const Cache& cache) {
  std::vector<std::string> versions;
  for (auto& name : cache.storage()->list("").value_or(std::vector<std::string>{})) {
    if (!std::string_view(name).starts_with(kVersionDirPrefix)) continue;
    std::string version = name.substr(kVersionDirPrefix.size());
    if (valid_compiler_version(version)) versions.push_back(std::move(version));
  }
  return versions;
}

VersionScan scan_version(const Cache& cache, const std::string& compiler_version) {
  VersionScan scan;
  scan.version_key = std::string(kVersionDirPrefix) + compiler_version;
  scan.version_dir = cache.root() / scan.version_key;
  for (auto& module : cache.storage()->list(scan.version_key).value_or(std::vector<std::string>{})) {
    std::string g, f;
    if (parse_module_name(module, g, f)) scan.modules.push_back(std::move(module));
  }
  if (scan.modules.empty()) return scan;
  fs::path summary_file = cache.private_dir() / kSummaryDir / scan.version_key;
  SummaryDraft draft(summary_file, cache.summary_settle_time()); // begun before any entry is read
  scan.summary = VersionSummary::load(summary_file, cache.trust());
  std::vector<const SettledEntry*> records = scan.summary.match(scan.modules);
  util::UniqueFd version_fd(::open(scan.version_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));

  // A recalled entry costs two stats; an inspected one, a directory read and
  // a stat per file. All wait on the kernel: a big cache (100,000 entries)
  // is read by several threads.
  const std::size_t n = scan.modules.size();
  scan.recalled.resize(n);
  if (version_fd.valid())
    util::parallel_ranges(n, 4096, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        if (records[i]) scan.recalled[i] = recall_entry(version_fd.get(), scan.modules[i], *records[i]);
    });
  for (std::size_t i = 0; i < n; ++i)
    if (!scan.recalled[i]) scan.inspected_modules.push_back(i);
  scan.inspected.resize(scan.inspected_modules.size());
  util::parallel_ranges(scan.inspected.size(), 2048, [&](std::size_t begin, std::size_t end) {
    for (std::size_t k = begin; k < end; ++k) {
      const std::string& module = scan.modules[scan.inspected_modules[k]];
      auto info = Entry(cache, scan.version_dir / module, scan.version_key + "/" + module).inspect();
      if (info) scan.inspected[k] = std::move(*info);
      else scan.inspected[k].state = EntryState::absent; // unreadable: not listed
    }
  });

  // The new summary, in the listing's order; written only when it would
  // change: a record added, or one dropped.
  std::size_t kept = 0;
  for (std::size_t i = 0, k = 0; i < n; ++i) {
    if (scan.recalled[i]) {
      draft.keep(scan.modules[i], *scan.recalled[i]->record);
      ++kept;
    } else {
      if (scan.inspected[k].state != EntryState::absent) draft.add(scan.modules[i], scan.inspected[k]);
      ++k;
    }
  }
  if (draft.added() > 0 || kept < scan.summary.size()) draft.commit();
  return scan;
}

class DirectoryReading final : public ReadingWay {
public:
  std::vector<EntryInfo> list(const Cache& cache) const override {
    std::vector<EntryInfo> entries;
    for (const auto& version : version_names(cache)) {
      auto more = list_version(cache, version);
      if (entries.empty()) entries = std::move(more); // most caches hold one version: no copy
      else entries.insert(entries.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    return entries;
  }

  std::vector<EntryInfo> list_version(const Cache& cache, const std::string& compiler_version) const override {
    VersionScan scan = scan_version(cache, compiler_version);
    std::vector<EntryInfo> entries = std::move(scan.inspected);
    std::erase_if(entries, [](const EntryInfo& e) { return e.state == EntryState::absent; });
    entries.reserve(scan.modules.size());
    for (std::size_t i = 0; i < scan.modules.size(); ++i)
      if (const auto& recalled = scan.recalled[i])
        entries.push_back(recalled->info(*key_from_module_name(scan.modules[i], compiler_version),
                                         scan.version_dir / scan.modules[i]));
    return entries;
  }

  CacheCensus census(const Cache& cache) const override {
    CacheCensus census;
    for (const auto& version : version_names(cache)) {
      VersionScan scan = scan_version(cache, version);
      for (const auto& recalled : scan.recalled)
        if (recalled) census.count(recalled->state(), recalled->bytes(), recalled->last_used);
      for (const auto& info : scan.inspected)
        if (info.state != EntryState::absent) census.count(info.state, info.bytes, info.last_used);
    }
    return census;
  }

  Result<EntryInfo> look_again(const Cache& cache, const Entry& entry, const EntryInfo& listed) const override {
    auto fresh = cache::look_again(entry, listed, cache.summary_settle_time());
    if (fresh) return fresh;
    EntryInfo gone = listed; // unreadable now: removed meanwhile, as far as a removal can tell
    gone.state = EntryState::absent;
    return gone;
  }

  // One folder read: every file's name and size, the folder's time and
  // the NEFF's atime for last use, the lock judged only when it is there.
  Result<EntryInfo> inspect(const Entry& entry) const override {
    EntryInfo info;
    info.dir = entry.dir();
    auto key = parse_key(entry.dir().string());
    if (!key) return fail(entry.dir().string() + " is not a cache entry directory");
    info.key = *key;
    int dfd = ::open(entry.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0) {
      if (errno == ENOENT) {
        info.state = EntryState::absent;
        return info;
      }
      return fail(util::errno_text("cannot open cache entry", entry.dir(), errno));
    }
    util::UniqueFd dir_fd(dfd);
    struct stat dir_stat {};
    if (::fstat(dfd, &dir_stat) != 0) return fail(util::errno_text("cannot stat", entry.dir(), errno));
    info.last_used = util::wall_time(dir_stat.st_mtim);
    info.dir_stamp = dir_stamp_of(dir_stat);

    DIR* d = ::fdopendir(::dup(dfd));
    if (d == nullptr) return fail(util::errno_text("cannot read cache entry", entry.dir(), errno));
    while (struct dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // raced away
      if (util::is_temp_name(name)) {
        info.temp_files.emplace_back(name);
        if (S_ISREG(st.st_mode)) info.bytes += static_cast<std::uint64_t>(st.st_size);
        continue;
      }
      note_entry_file(info, name, static_cast<std::uint64_t>(st.st_size), S_ISREG(st.st_mode));
      // The framework loads NEFFs without telling us; its reads move the
      // NEFF's atime (relatime: at least once a day), so last use is the
      // later of that and the mark we set on our hits.
      if (name == kNeffFile && info.has_neff) info.last_used = std::max(info.last_used, util::wall_time(st.st_atim));
    }
    ::closedir(d);
    // Rare, so judged (read, liveness) only when the file is there. One
    // that cannot be read (a FIFO or a device put there, no permission) is
    // listed as held, so that nothing breaks it: the entry stays in the
    // listing, a compile names the error, clear-locks --force removes it.
    if (info.framework_lock.state != storage::LockState::absent) {
      auto judged = storage::judge_lock(*entry.storage(), entry.key_of(kFrameworkLockFile),
                                        entry.cache().stale_lock_age(), std::chrono::system_clock::now());
      if (judged) info.framework_lock = std::move(*judged);
      else spdlog::warn("cannot judge the lock of {}: {}", entry.dir().string(), judged.error());
    }

    // A done entry is done whoever holds its lock (a compile that found it
    // done and is about to leave), so only the others need the probe.
    bool done = info.has_done && info.has_neff;
    bool locked = !done && (info.framework_lock.blocks() ||
                            (info.has_lock_file && util::probe_lock(entry.lock_path()) == util::LockState::held));
    info.state = state_from_files(info, locked);
    return info;
  }

  Result<Integrity> verify_neff(const Entry& entry) const override {
    auto first = check_neff_in_place(entry.dir(), entry.cache().trust(), -1);
    if (first && *first == Integrity::mismatch) // republished meanwhile?
      return check_neff_in_place(entry.dir(), entry.cache().trust(), -1);
    return first;
  }

  bool exists(const Entry& entry) const override {
    struct stat st {};
    return ::lstat(entry.dir().c_str(), &st) == 0;
  }

  std::optional<fs::path> local_files(const Cache& cache, const CacheKey& key, const fs::path&) const override {
    fs::path dir = cache.entry_dir(key);
    std::error_code ec;
    if (!fs::is_regular_file(dir / kGraphFile, ec)) return std::nullopt;
    return dir;
  }
};

} // namespace

const ReadingWay& directory_reading() {
  static const DirectoryReading way;
  return way;
}

} // namespace npc::cache
