// Import: checking a bundle's members against its manifest while staging
// them, then publishing each whole entry into the cache under its lock.

#include <npc/bundle/bundle.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/bundle/manifest.hpp>
#include <npc/bundle/printable.hpp>
#include <npc/bundle/reader.hpp>
#include <npc/bundle/staging.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/entry.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/strings.hpp>

namespace npc::bundle {

using cache::kFlagsFile;
using cache::kGraphFile;
using cache::kLogFile;
using cache::kMetaFile;
using cache::kNeffFile;

namespace {

// "entries/", "entries/neuronxcc-<v>/" or "entries/neuronxcc-<v>/MODULE_.../":
// a folder of the bundle's layout, with nothing in its name that could
// point elsewhere.
bool is_layout_folder(std::string_view name) {
  while (name.ends_with('/')) name.remove_suffix(1);
  std::size_t depth = 0;
  for (std::size_t start = 0; start <= name.size();) {
    std::size_t end = std::min(name.find('/', start), name.size());
    std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (depth == 0 && part != "entries") return false;
    ++depth;
    start = end + 1;
  }
  return depth >= 1 && depth <= 3;
}

enum class Plan { wanted, skipped, rejected };

// One entry of the manifest on its way in.
struct Incoming {
  const BundleEntry* entry = nullptr;
  Plan plan = Plan::wanted;
  fs::path staging;                       // <staging>/<index>
  std::map<std::string, fs::path> staged; // file name -> staged path, verified
};

// Where a member's data goes: the entry it belongs to and its record there.
struct Destination {
  Incoming* in = nullptr;
  std::string file;
  const BundleFile* expected = nullptr;
};

// Whether staging goes on after one member.
enum class Staging { go_on, stop };
// Whether publishing an entry waits for a compile here that holds its lock.
enum class Wait { no, yes };
// How publishing one entry ended: done with it (imported, or skipped or an
// error recorded), or its lock is held and it was not waited for.
enum class PublishEnd { finished, busy };
// How taking an entry's lock ended: `given_up` is recorded in the report.
enum class LockEnd { taken, busy, given_up };

class Importer {
public:
  Importer(const cache::Cache& cache, const ImportOptions& options, ImportReport& report)
      : cache_(cache), options_(options), report_(report) {}

  void run(const fs::path& bundle) {
    if (auto s = cache_.ensure_root(); !s) return error(s.error(), ExitCode::environment);
    remove_stale_import_staging(cache_);
    auto fd = util::open_input_file(bundle);
    if (!fd) return error("cannot import the bundle: " + fd.error(), ExitCode::usage);

    ImportStaging staging(cache_);
    if (auto s = staging.lock(); !s) return error(s.error(), ExitCode::environment);
    staging_ = staging.path();

    if (auto s = reader_.open(fd->get(), bundle); !s) return error(s.error(), ExitCode::failure);
    if (!read_manifest(bundle)) return;
    plan();
    if (report_.error) return;
    stage_members();
    check_complete();
    publish_all();
  }

private:
  // --- the report ---------------------------------------------------------------

  void error(const std::string& message, ExitCode code) {
    report_.error = message;
    report_.error_code = code;
  }

  void skip(Incoming& in, const std::string& reason) {
    in.plan = Plan::skipped;
    report_.skipped.push_back({in.entry->key.str(), reason});
  }

  void reject(Incoming& in, const std::string& reason) {
    if (in.plan == Plan::rejected) return;
    in.plan = Plan::rejected;
    report_.rejected.push_back({in.entry->key.str(), reason});
    std::ignore = util::remove_tree(in.staging); // frees its space now
    in.staged.clear();
  }

  // A member or manifest record that belongs to no entry being imported;
  // each key once.
  void reject_stray(const std::string& key, const std::string& reason) {
    if (stray_.insert(key).second) report_.rejected.push_back({key, reason});
  }

  // --- the manifest and the plan ---------------------------------------------------

  bool read_manifest(const fs::path& bundle) {
    auto text = reader_.read_manifest();
    if (!text) {
      error(text.error(), ExitCode::failure);
      return false;
    }
    auto parsed = parse_manifest(*text);
    if (!parsed) {
      error(bundle.string() + ": the manifest is unusable: " + parsed.error(), ExitCode::failure);
      return false;
    }
    manifest_ = std::move(*parsed);
    report_.tool_version = manifest_.manifest.tool_version;
    report_.created = manifest_.manifest.created;
    for (const auto& bad : manifest_.bad) reject_stray(bad.key, bad.reason);
    return true;
  }

  // What to take, before reading any member: failures only when asked,
  // nothing this cache has done already; and whether it fits on the disk.
  void plan() { check_free_space(plan_entries()); }

  // Returns the bytes the wanted entries declare.
  std::uint64_t plan_entries() {
    const auto& entries = manifest_.manifest.entries;
    incoming_.resize(entries.size());
    std::uint64_t declared = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      Incoming& in = incoming_[i];
      in.entry = &entries[i];
      in.staging = staging_ / std::to_string(i);
      by_key_[entries[i].key.str()] = i;
      if (entries[i].failed && !options_.include_failed) {
        skip(in, "a cached failure (--include-failed imports it)");
      } else if (cache_.entry(entries[i].key).looks_done()) {
        skip(in, std::string(kSkippedDoneHere));
      } else {
        for (const auto& [name, file] : entries[i].files) declared += file.bytes;
      }
    }
    return declared;
  }

  void check_free_space(std::uint64_t declared) {
    struct statvfs fsinfo {};
    if (::statvfs(staging_.c_str(), &fsinfo) != 0) return;
    std::uint64_t free_bytes = static_cast<std::uint64_t>(fsinfo.f_bavail) * fsinfo.f_frsize;
    if (declared > free_bytes)
      error("the bundle's entries need " + util::format_bytes(declared) + " (" + std::to_string(declared) +
                " bytes) and only " + util::format_bytes(free_bytes) + " are free in " + cache_.root().string() +
                "; nothing was imported",
            ExitCode::environment);
  }

  // --- staging ----------------------------------------------------------------------

  void stage_members() {
    while (auto header = reader_.next_member()) {
      auto destination = destination_of(*header);
      if (!destination) continue; // its data is skipped with the next header
      if (stage_member(*destination->in, destination->file, *destination->expected) == Staging::stop) return;
    }
  }

  // Where a member's data is to be staged; nullopt when it is not, with the
  // reason recorded (none for a member of an entry not wanted).
  std::optional<Destination> destination_of(const MemberHeader& header) {
    // A bundle re-packed by another tar (GNU tar writes a member for each
    // folder): the folders of the layout carry nothing; files are checked.
    if (header.directory && is_layout_folder(header.name)) return std::nullopt;
    auto member = parse_member_name(header.name);
    if (!member) {
      reject_stray(printable(header.name), "unsafe or unknown member name '" + printable(header.name) +
                                               "' (expected entries/neuronxcc-<version>/MODULE_<hash>+<hash>/<file>)");
      return std::nullopt;
    }
    auto found = by_key_.find(member->key.str());
    if (found == by_key_.end()) {
      reject_stray(member->key.str(), "member " + member->file + " of an entry the manifest does not list");
      return std::nullopt;
    }
    Incoming& in = incoming_[found->second];
    if (in.plan != Plan::wanted) return std::nullopt;
    if (!header.regular) {
      reject(in, "member " + member->file + " is not a regular file (links and devices are refused)");
      return std::nullopt;
    }
    auto expected = in.entry->files.find(member->file);
    if (expected == in.entry->files.end()) {
      reject(in, "member " + member->file + " is not in the manifest");
      return std::nullopt;
    }
    if (in.staged.contains(member->file)) {
      reject(in, "member " + member->file + " appears twice");
      return std::nullopt;
    }
    if (header.size && static_cast<std::uint64_t>(*header.size) != expected->second.bytes) {
      reject(in, "member " + member->file + " has " + std::to_string(*header.size) + " bytes; the manifest says " +
                     std::to_string(expected->second.bytes));
      return std::nullopt;
    }
    return Destination{&in, member->file, &expected->second};
  }

  // Copies one member's data into the staging folder, at most the size the
  // manifest gives, checking it; stops when the archive cannot be read on or
  // the local disk fails.
  Staging stage_member(Incoming& in, const std::string& file, const BundleFile& expected) {
    if (auto s = util::ensure_dir(in.staging, 0700); !s) {
      reject(in, "cannot stage it: " + s.error());
      return Staging::go_on;
    }
    fs::path path = in.staging / file;
    // The cache's files are 0666 less the umask (group-writable in a shared cache).
    util::UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666));
    if (!out.valid()) {
      reject(in, util::errno_text("cannot stage it:", path, errno));
      return Staging::go_on;
    }
    CopyResult copied = reader_.copy_member(out.get(), expected);
    switch (copied.end) {
    case CopyEnd::damaged:
      reject(in, "member " + file + " is truncated or corrupt: " + *reader_.damage());
      return Staging::stop;
    case CopyEnd::too_long:
      reject(in, "member " + file + " is larger than the " + std::to_string(expected.bytes) +
                     " bytes the manifest says");
      return Staging::go_on;
    case CopyEnd::write_failed:
      return local_disk_failed(in, copied.write_errno);
    case CopyEnd::verified:
    case CopyEnd::wrong_size:
    case CopyEnd::wrong_digest:
      break;
    }
    if (::close(out.release()) != 0) return local_disk_failed(in, errno);
    if (copied.end == CopyEnd::wrong_size) {
      reject(in, "member " + file + " has " + std::to_string(copied.bytes) + " bytes; the manifest says " +
                     std::to_string(expected.bytes));
      return Staging::go_on;
    }
    if (copied.end == CopyEnd::wrong_digest) {
      reject(in, "member " + file + " does not match its SHA-256 in the manifest (corrupt)");
      return Staging::go_on;
    }
    in.staged[file] = path;
    return Staging::go_on;
  }

  // Not the bundle's fault: the local disk.
  Staging local_disk_failed(Incoming& in, int err) {
    error(util::errno_text("cannot stage the bundle in", in.staging, err), ExitCode::environment);
    reject(in, "could not be staged (local disk)");
    return Staging::stop;
  }

  // Every wanted entry has all its files staged, or is rejected.
  void check_complete() {
    const auto& damage = reader_.damage();
    for (auto& in : incoming_) {
      if (in.plan != Plan::wanted) continue;
      for (const auto& [name, file] : in.entry->files) {
        if (in.staged.contains(name)) continue;
        if (damage)
          reject(in, "member " + name + " is missing: the bundle is truncated or corrupt (" + *damage + ")");
        else
          reject(in, "member " + name + " is missing from the bundle");
        break;
      }
    }
    if (damage) warn_unless_named(*damage);
  }

  // Damage no rejection names hit only what came after the last entry.
  void warn_unless_named(const std::string& damage) {
    bool named = std::any_of(report_.rejected.begin(), report_.rejected.end(),
                             [&](const KeyReason& r) { return r.reason.find(damage) != std::string::npos; });
    if (!named) spdlog::warn("the bundle ends in a damaged part ({}); every entry before it was whole", damage);
  }

  // --- publishing -------------------------------------------------------------------

  // Entries nobody holds first; then, waiting, those a compile here holds.
  void publish_all() {
    std::vector<Incoming*> busy;
    for (auto& in : incoming_)
      if (in.plan == Plan::wanted && !report_.error) {
        if (publish(in, Wait::no) == PublishEnd::busy) busy.push_back(&in);
      }
    for (auto* in : busy)
      if (!report_.error) std::ignore = publish(*in, Wait::yes);
  }

  PublishEnd publish(Incoming& in, Wait wait) {
    const cache::CacheKey& key = in.entry->key;
    fs::path entry_dir = cache_.entry_dir(key);
    if (auto trusted = cache_.entry(entry_dir).check_trust(); !trusted) {
      skip(in, trusted.error());
      spdlog::warn("{}", trusted.error());
      return PublishEnd::finished;
    }
    storage::Lock lock;
    switch (take_lock(in, entry_dir, wait, lock)) {
    case LockEnd::busy:
      return PublishEnd::busy;
    case LockEnd::given_up:
      return PublishEnd::finished;
    case LockEnd::taken:
      break;
    }
    if (!still_wanted(in, entry_dir)) return PublishEnd::finished;
    if (auto s = cache_.entry(entry_dir).publish_incoming(incoming_files(in)); !s) {
      error("cannot publish " + key.str() + ": " + s.error(), ExitCode::environment);
      return PublishEnd::finished;
    }
    report_.imported.push_back(key.str());
    return PublishEnd::finished;
  }

  // Without waiting, a held lock is `busy`; waiting, a holder that keeps it
  // past --lock-timeout leaves the entry to its compile (skipped).
  LockEnd take_lock(Incoming& in, const fs::path& entry_dir, Wait wait, storage::Lock& lock) {
    if (wait == Wait::no) {
      if (auto s = util::ensure_dir(entry_dir); !s) {
        error(s.error(), ExitCode::environment);
        return LockEnd::given_up;
      }
      auto taken = cache_.entry(entry_dir).try_lock();
      if (!taken) {
        error(taken.error(), ExitCode::environment);
        return LockEnd::given_up;
      }
      if (!taken->has_value()) return LockEnd::busy;
      lock = std::move(**taken);
      return LockEnd::taken;
    }
    auto taken = cache_.entry(entry_dir).lock(options_.lock_wait);
    if (!taken) {
      error(taken.error(), ExitCode::environment);
      return LockEnd::given_up;
    }
    if (auto* busy = std::get_if<cache::LockBusy>(&*taken)) {
      skip(in, "being compiled here (" + cache::describe_busy(entry_dir, *busy) + "); left to that compile");
      return LockEnd::given_up;
    }
    lock = std::move(std::get<storage::Lock>(*taken));
    return LockEnd::taken;
  }

  // With the lock held: whether the entry still needs what the bundle has
  // (another process may have finished it meanwhile).
  bool still_wanted(Incoming& in, const fs::path& entry_dir) {
    auto info = cache_.entry(entry_dir).inspect();
    if (!info) {
      error(info.error(), ExitCode::environment);
      return false;
    }
    if (info->state == cache::EntryState::done) {
      skip(in, std::string(kSkippedDoneHere));
      return false;
    }
    if (in.entry->failed && info->has_log) {
      skip(in, std::string(kSkippedFailedHere));
      return false;
    }
    return true;
  }

  // The staged files of an entry, as the cache publishes them.
  cache::IncomingEntry incoming_files(const Incoming& in) {
    cache::IncomingEntry incoming;
    auto staged = [&](std::string_view name) -> std::optional<fs::path> {
      auto it = in.staged.find(std::string(name));
      if (it == in.staged.end()) return std::nullopt;
      return it->second;
    };
    incoming.graph = staged(kGraphFile);
    incoming.flags = staged(kFlagsFile);
    if (in.entry->failed) {
      incoming.log = staged(kLogFile);
    } else {
      incoming.neff = staged(kNeffFile);
      const BundleFile& neff = in.entry->files.at(std::string(kNeffFile));
      incoming.neff_sha256 = neff.sha256;
      incoming.neff_bytes = neff.bytes;
    }
    if (auto meta_path = staged(kMetaFile)) {
      // The producer's attempt history (compile times feed scheduling);
      // its integrity record is replaced by the verified one.
      auto text = util::read_file(*meta_path);
      if (text)
        if (auto meta = cache::parse_entry_meta(*text)) incoming.attempts = std::move(meta->attempts);
    }
    return incoming;
  }

  const cache::Cache& cache_;
  const ImportOptions& options_;
  ImportReport& report_;
  BundleReader reader_;
  fs::path staging_;
  ParsedManifest manifest_;
  std::vector<Incoming> incoming_;
  std::map<std::string, std::size_t> by_key_;
  std::set<std::string> stray_;
};

} // namespace

ImportReport import_bundle(const cache::Cache& cache, const fs::path& bundle, const ImportOptions& options) {
  ImportReport report;
  Importer importer(cache, options, report);
  importer.run(bundle);
  return report;
}

} // namespace npc::bundle
