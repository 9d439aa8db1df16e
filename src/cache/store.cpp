#include <npc/cache/store.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <optional>
#include <stdexcept>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/summary.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/error.hpp>
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

} // namespace

void set_lock_tool_name(std::string name) { tool_name_storage() = std::move(name); }
const std::string& lock_tool_name() { return tool_name_storage(); }

Cache::Cache(fs::path root, const util::Clock& clock)
    : Cache(std::move(root), trust_mode_from_environment(), clock) {}

Cache::Cache(fs::path root, TrustMode trust, const util::Clock& clock)
    : root_(std::move(root)),
      storage_(std::make_shared<storage::LocalStorage>(root_, root_ / kPrivateDir / kTrashDir)),
      connections_{storage_},
      trust_(trust),
      clock_(clock) {
  if (root_.empty()) throw std::logic_error("a cache directory needs a path");
}

Cache::Cache(std::vector<std::shared_ptr<storage::Storage>> connections, const util::Clock& clock)
    : storage_(connections.empty() ? nullptr : connections.front()),
      connections_(std::move(connections)),
      // Who may write the objects is the store's access control, not modes.
      trust_(TrustMode::trusted),
      clock_(clock) {
  if (!storage_) throw std::logic_error("a cache in a storage needs a connection");
}

fs::path Cache::private_dir() const { return is_directory() ? root_ / kPrivateDir : fs::path(); }

std::string Cache::describe() const { return storage_->describe(); }

std::string Cache::describe(const EntryInfo& entry) const {
  return is_directory() ? entry.dir.string() : storage_->describe(entry.dir.generic_string());
}

Entry Cache::entry(fs::path dir, std::size_t connection) const {
  return Entry(*this, std::move(dir)).through(connections_.at(connection));
}

void Cache::share_out(std::size_t count,
                      const std::function<void(std::size_t connection, std::size_t i)>& work) const {
  if (connections_.size() > 1) {
    util::for_each_shared_out(count, connections_.size(), work);
    return;
  }
  // A thread for every 256 items, up to the machine's: each one's work is a
  // few system calls.
  const std::size_t threads = std::min(util::parallel_threads(), (count + 255) / 256);
  util::for_each_shared_out(count, threads, [&](std::size_t, std::size_t i) { work(0, i); });
}

Status Cache::ensure_root() const {
  if (!is_directory()) return ok_status(); // the store's owner made the bucket
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
  if (auto s = check_directory_trust(root_, trust_, "the cache directory", Links::follow_owned); !s) return s;
  // Below the root, modes follow the umask: the root alone decides who gets in.
  if (auto s = util::ensure_dir(private_dir()); !s) return s;
  return ok_status();
}

void CacheCensus::count(EntryState state, std::uint64_t entry_bytes, util::WallTime last_used) {
  ++entries;
  ++by_state[static_cast<std::size_t>(state)];
  bytes += entry_bytes;
  if (!oldest_use || last_used < *oldest_use) oldest_use = last_used;
  if (!newest_use || last_used > *newest_use) newest_use = last_used;
}

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

} // namespace

std::vector<EntryInfo> Cache::list_tree(const std::string& folder) const {
  const auto now = std::chrono::system_clock::now();
  auto files = storage_->list_tree(folder);
  if (!files) throw EnvironmentError(files.error());
  auto entries = entries_from_tree(*files, folder);
  for (auto& info : entries) {
    // Rare, so judged (a read) only when a lock object is there. A done
    // entry is done whoever holds its lock, as in a directory.
    if (info.framework_lock.state != storage::LockState::absent && !(info.has_done && info.has_neff)) {
      auto judged = storage::judge_lock(*storage_, info.dir.generic_string() + "/" + std::string(kFrameworkLockFile),
                                        stale_lock_age_, now);
      if (!judged) throw EnvironmentError(judged.error());
      info.framework_lock = std::move(*judged);
    }
    info.state = state_from_files(info, info.framework_lock.blocks());
  }
  return entries;
}

std::vector<EntryInfo> Cache::list_version(const std::string& compiler_version) const {
  if (!is_directory()) return list_tree(std::string(kVersionDirPrefix) + compiler_version);
  return list_directory_version(compiler_version);
}

std::vector<EntryInfo> Cache::list_directory_version(const std::string& compiler_version) const {
  VersionScan scan = scan_version(*this, compiler_version);
  std::vector<EntryInfo> entries = std::move(scan.inspected);
  std::erase_if(entries, [](const EntryInfo& e) { return e.state == EntryState::absent; });
  entries.reserve(scan.modules.size());
  for (std::size_t i = 0; i < scan.modules.size(); ++i)
    if (const auto& recalled = scan.recalled[i])
      entries.push_back(recalled->info(*key_from_module_name(scan.modules[i], compiler_version),
                                       scan.version_dir / scan.modules[i]));
  return entries;
}

std::vector<EntryInfo> Cache::list() const {
  if (!is_directory()) return list_tree("");
  std::vector<EntryInfo> entries;
  for (const auto& version : version_names(*this)) {
    auto more = list_version(version);
    if (entries.empty()) entries = std::move(more); // most caches hold one version: no copy
    else entries.insert(entries.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return entries;
}

CacheCensus Cache::census() const {
  CacheCensus census;
  if (!is_directory()) {
    for (const auto& e : list_tree("")) census.count(e.state, e.bytes, e.last_used);
    return census;
  }
  for (const auto& version : version_names(*this)) {
    VersionScan scan = scan_version(*this, version);
    for (const auto& recalled : scan.recalled)
      if (recalled) census.count(recalled->state(), recalled->bytes(), recalled->last_used);
    for (const auto& info : scan.inspected)
      if (info.state != EntryState::absent) census.count(info.state, info.bytes, info.last_used);
  }
  return census;
}

void Cache::empty_trash() const {
  if (!is_directory()) return;
  fs::path trash = private_dir() / kTrashDir;
  for (const auto& name : util::list_names(trash).value_or(std::vector<std::string>{})) std::ignore = util::remove_tree(trash / name);
}

} // namespace npc::cache
