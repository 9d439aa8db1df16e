#include <npc/cache/listing_way.hpp>

#include <fcntl.h>
#include <optional>
#include <unistd.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/summary.hpp>
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

class DirectoryListing final : public ListingWay {
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
};

} // namespace

const ListingWay& directory_listing() {
  static const DirectoryListing way;
  return way;
}

} // namespace npc::cache
