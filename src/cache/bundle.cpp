#include <npc/cache/bundle.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/trust.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

using nlohmann::json;

namespace {

constexpr auto& kBundleFiles = kTransferFiles;
// Held by a running import inside its staging folder.
constexpr std::string_view kImportLockName = "npc-import.lock";
// A staging folder younger than this is never taken for a dead import's.
constexpr auto kStaleStagingAge = std::chrono::minutes(10);
constexpr std::size_t kChunk = 1 << 20;

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// For messages: a name from an archive may hold anything.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 300)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > 300) out += "...";
  return out;
}

// npc-entry.json and compile_flags.json are a few KiB; anything far larger
// is not ours.
constexpr std::uint64_t kMaxRecordBytes = 16 * 1024 * 1024;

std::vector<std::string> read_dir_names(const fs::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  return names;
}

bool locally_done(const fs::path& entry_dir) {
  struct stat st {};
  return ::stat((entry_dir / kDoneFile).c_str(), &st) == 0 &&
         ::stat((entry_dir / kNeffFile).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

bool is_bundle_file_name(std::string_view name) {
  return std::find(kBundleFiles.begin(), kBundleFiles.end(), name) != kBundleFiles.end();
}

std::string member_name(const CacheKey& key, std::string_view file) {
  return std::string(kBundleEntriesDir) + "/" + key.str() + "/" + std::string(file);
}

std::optional<MemberName> parse_member_name(std::string_view name) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    auto slash = name.find('/', start);
    parts.push_back(name.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos || parts.size() > 4) break;
    start = slash + 1;
  }
  if (parts.size() != 4 || parts[0] != kBundleEntriesDir) return std::nullopt;
  if (!parts[1].starts_with(kVersionDirPrefix)) return std::nullopt;
  MemberName member;
  member.key.compiler_version = std::string(parts[1].substr(kVersionDirPrefix.size()));
  if (!valid_compiler_version(member.key.compiler_version)) return std::nullopt;
  if (!parse_module_name(parts[2], member.key.graph_hash, member.key.flags_hash)) return std::nullopt;
  if (!is_bundle_file_name(parts[3])) return std::nullopt;
  member.file = std::string(parts[3]);
  // Exactly the canonical spelling, nothing that merely resolves to it.
  if (member_name(member.key, member.file) != name) return std::nullopt;
  return member;
}

// --- manifest ---------------------------------------------------------------

std::string serialize_manifest(const BundleManifest& manifest) {
  json entries = json::array();
  for (const auto& e : manifest.entries) {
    json files = json::object();
    for (const auto& [name, file] : e.files) files[name] = {{"bytes", file.bytes}, {"sha256", file.sha256}};
    entries.push_back({{"key", e.key.str()},
                       {"compiler_version", e.key.compiler_version},
                       {"state", e.failed ? "failed" : "done"},
                       {"flags", e.flags ? json(*e.flags) : json(nullptr)},
                       {"files", files}});
  }
  json doc = {{"format", manifest.format},
              {"tool", "neuron_parallel_compile"},
              {"tool_version", manifest.tool_version},
              {"created", manifest.created},
              {"entries", entries}};
  return doc.dump(1) + "\n";
}

namespace {

// One manifest entry; the reason when it is unusable.
Result<BundleEntry> parse_manifest_entry(const json& e, const std::string& key_text) {
  if (!e.is_object()) return fail("not a JSON object");
  auto key = parse_key(key_text);
  if (!key || key->str() != key_text) return fail("'" + printable(key_text) + "' is not a cache key");
  BundleEntry entry;
  entry.key = *key;
  auto version = e.find("compiler_version");
  if (version == e.end() || !version->is_string() || version->get<std::string>() != key->compiler_version)
    return fail("its compiler_version does not match its key");
  auto state = e.find("state");
  std::string state_text = state != e.end() && state->is_string() ? state->get<std::string>() : "done";
  if (state_text != "done" && state_text != "failed") return fail("unknown state '" + printable(state_text) + "'");
  entry.failed = state_text == "failed";
  if (auto flags = e.find("flags"); flags != e.end() && !flags->is_null()) {
    if (!flags->is_array()) return fail("'flags' is not a list");
    std::vector<std::string> list;
    for (const auto& f : *flags) {
      if (!f.is_string()) return fail("'flags' is not a list of strings");
      list.push_back(f.get<std::string>());
    }
    entry.flags = std::move(list);
  }
  auto files = e.find("files");
  if (files == e.end() || !files->is_object()) return fail("no 'files' object");
  for (const auto& [name, record] : files->items()) {
    if (!is_bundle_file_name(name)) return fail("unknown file '" + printable(name) + "'");
    if (!record.is_object()) return fail("the record of " + name + " is not an object");
    auto bytes = record.find("bytes");
    auto sha = record.find("sha256");
    if (bytes == record.end() || !bytes->is_number_unsigned())
      return fail("the record of " + name + " has no byte count");
    if (sha == record.end() || !sha->is_string() || !is_sha256_hex(sha->get<std::string>()))
      return fail("the record of " + name + " has no SHA-256");
    entry.files[name] = BundleFile{bytes->get<std::uint64_t>(), sha->get<std::string>()};
  }
  bool has_neff = entry.files.contains(std::string(kNeffFile));
  bool has_log = entry.files.contains(std::string(kLogFile));
  if (!entry.failed && !has_neff) return fail("a done entry without model.neff");
  if (entry.failed && (!has_log || has_neff)) return fail("a failed entry must have model.log and no model.neff");
  return entry;
}

} // namespace

Result<ParsedManifest> parse_manifest(std::string_view json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return fail("not a JSON object");
  auto format = doc.find("format");
  if (format == doc.end() || !format->is_number_integer()) return fail("no format number");
  if (format->get<long long>() != kBundleFormat) {
    if (format->get<long long>() > kBundleFormat)
      return fail("it is format " + std::to_string(format->get<long long>()) +
                  ", from a newer version; this one reads format " + std::to_string(kBundleFormat));
    return fail("unknown format " + std::to_string(format->get<long long>()));
  }
  ParsedManifest parsed;
  if (auto v = doc.find("tool_version"); v != doc.end() && v->is_string()) parsed.manifest.tool_version = *v;
  if (auto v = doc.find("created"); v != doc.end() && v->is_string()) parsed.manifest.created = *v;
  auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) return fail("no 'entries' list");
  std::set<std::string> seen;
  std::size_t index = 0;
  for (const auto& e : *entries) {
    ++index;
    std::string key_text = "(entry " + std::to_string(index) + ")";
    if (e.is_object())
      if (auto k = e.find("key"); k != e.end() && k->is_string()) key_text = k->get<std::string>();
    if (!seen.insert(key_text).second) return fail("it lists " + printable(key_text) + " twice");
    auto entry = parse_manifest_entry(e, key_text);
    if (!entry) {
      parsed.bad.push_back({printable(key_text), "its manifest record is unusable: " + entry.error()});
      continue;
    }
    parsed.manifest.entries.push_back(std::move(*entry));
  }
  return parsed;
}

// --- launcher report -------------------------------------------------------------

Result<std::vector<ReportedGraph>> read_launcher_report(const fs::path& report) {
  auto text = util::read_file(report);
  if (!text) return fail(text.error());
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return fail(report.string() + " is not a JSON object");
  auto graphs = doc.find("compilation_report");
  if (graphs == doc.end() || !graphs->is_object())
    return fail(report.string() + " has no compilation_report object (is it a neuron_parallel_compile --report file?)");
  std::vector<ReportedGraph> found;
  std::set<CacheKey> seen;
  for (const auto& [graph_path, value] : graphs->items()) {
    if (!value.is_object()) return fail(report.string() + ": the record of " + graph_path + " is not an object");
    std::optional<CacheKey> key;
    if (auto k = value.find("key"); k != value.end() && k->is_string()) key = parse_key(k->get<std::string>());
    if (!key) key = parse_key(fs::path(graph_path).parent_path().string());
    if (!key) return fail(report.string() + ": " + graph_path + " does not name a cache entry");
    ReportedGraph graph{*key, ""};
    if (auto s = value.find("status"); s != value.end() && s->is_string()) graph.status = *s;
    if (seen.insert(*key).second) found.push_back(std::move(graph));
  }
  return found;
}

// --- export -------------------------------------------------------------------------

namespace {

struct ArchiveWriter {
  struct archive* a = archive_write_new();
  ~ArchiveWriter() {
    if (a != nullptr) archive_write_free(a);
  }
  [[nodiscard]] std::string error() const {
    const char* text = archive_error_string(a);
    return text != nullptr ? text : "unknown libarchive error";
  }
};

struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
using EntryPtr = std::unique_ptr<struct archive_entry, EntryFree>;

struct Candidate {
  CacheKey key;
  bool must_be_done = false; // the report says the run left it done
};

struct Exporting {
  BundleEntry entry;
  EntrySnapshot snapshot;
};

void write_member_header(ArchiveWriter& w, const std::string& name, std::uint64_t size, std::time_t mtime) {
  EntryPtr e(archive_entry_new());
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0644);
  archive_entry_set_mtime(e.get(), mtime, 0);
  if (archive_write_header(w.a, e.get()) < ARCHIVE_WARN)
    throw EnvironmentError("cannot write the bundle: " + w.error());
}

void write_member_data(ArchiveWriter& w, std::string_view data) {
  while (!data.empty()) {
    la_ssize_t n = archive_write_data(w.a, data.data(), data.size());
    if (n <= 0) throw EnvironmentError("cannot write the bundle: " + w.error());
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Streams one file of a snapshot into the archive, checking it is still what
// the manifest says (it was hashed through the same descriptor).
void write_member_from_fd(ArchiveWriter& w, int fd, const BundleFile& expected, const std::string& name) {
  std::vector<char> buffer(kChunk);
  util::Sha256 sha;
  std::uint64_t total = 0;
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw EnvironmentError("cannot read " + name + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    auto size = static_cast<std::uint64_t>(n);
    if (total + size > expected.bytes) break;
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    sha.update(chunk);
    write_member_data(w, chunk);
    total += size;
    offset += n;
  }
  if (total != expected.bytes || sha.hex_digest() != expected.sha256)
    throw Error(name + " was modified in place while it was being exported; nothing was written (run the export again)");
}

// Each entry's files stay open from hashing to writing: raise the limit on
// open files as far as allowed, and refuse a selection that does not fit.
void make_room_for_descriptors(std::size_t needed) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t want = static_cast<rlim_t>(needed) + 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < want) {
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? want : std::min(want, limit.rlim_max);
    std::ignore = ::setrlimit(RLIMIT_NOFILE, &limit);
    std::ignore = ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < want)
    throw EnvironmentError("exporting this many entries needs about " + std::to_string(want) +
                           " open files, above this process's hard limit of " +
                           std::to_string(limit.rlim_max) +
                           "; raise it (ulimit -n) or export fewer entries at once (--used-since, --from-report)");
}

// Hashes a snapshot's files and builds its manifest record; the reason it
// cannot be exported otherwise.
Result<Exporting> prepare_entry(const CacheKey& key, EntrySnapshot snapshot, bool& unverified) {
  Exporting out;
  out.entry.key = key;
  out.entry.failed = !snapshot.done;
  // A done entry carries no stale model.log; a failed one has no NEFF.
  if (snapshot.done) snapshot.files.erase(std::string(kLogFile));
  else snapshot.files.erase(std::string(kNeffFile));

  std::optional<EntryMeta> meta;
  if (auto it = snapshot.files.find(kMetaFile); it != snapshot.files.end()) {
    auto text = util::read_fd(it->second.get(), kMaxRecordBytes);
    if (!text) return fail("cannot read npc-entry.json: " + text.error());
    auto parsed = parse_entry_meta(*text);
    if (!parsed) return fail("npc-entry.json is corrupt (" + parsed.error() + ")");
    meta = std::move(*parsed);
  }
  for (const auto& [name, fd] : snapshot.files) {
    auto digest = util::sha256_fd(fd.get());
    if (!digest) return fail("cannot read " + name + ": " + digest.error());
    out.entry.files[name] = BundleFile{digest->size, digest->sha256};
  }
  if (snapshot.done) {
    const BundleFile& neff = out.entry.files.at(std::string(kNeffFile));
    if (meta && meta->neff_sha256) {
      if (*meta->neff_sha256 != neff.sha256 || (meta->neff_bytes && *meta->neff_bytes != neff.bytes))
        return fail("its NEFF does not match its integrity record (neuron_cache verify --repair recompiles it)");
    } else {
      unverified = true; // written by another tool: the bundle's checksum is taken now
    }
  }
  if (auto it = snapshot.files.find(kFlagsFile); it != snapshot.files.end()) {
    auto text = util::read_fd(it->second.get(), kMaxRecordBytes);
    if (text)
      if (auto flags = parse_compile_flags(*text)) out.entry.flags = std::move(*flags);
  }
  out.snapshot = std::move(snapshot);
  return out;
}

} // namespace

ExportReport export_bundle(const Cache& cache, const ExportSelection& selection, const fs::path& output,
                           const ExportOptions& options) {
  ExportReport report;
  report.output = output;
  std::vector<Candidate> candidates;
  auto from_listing = [&](bool (*keep)(const EntryInfo&, double), double arg) {
    for (const auto& e : cache.list()) {
      if (!keep(e, arg)) continue;
      if (e.state == EntryState::done) candidates.push_back({e.key, true});
      else if (e.state == EntryState::failed) {
        if (options.include_failed) candidates.push_back({e.key, false});
        else report.left_out.push_back({e.key.str(), "a cached failure (--include-failed exports it)"});
      }
    }
  };
  switch (selection.kind) {
  case ExportSelection::Kind::all:
    from_listing([](const EntryInfo&, double) { return true; }, 0);
    break;
  case ExportSelection::Kind::used_since: {
    auto cutoff = cache.clock().now() - std::chrono::duration_cast<util::WallTime::duration>(
                                            std::chrono::duration<double>(selection.used_since_days * 86400.0));
    double cutoff_unix = static_cast<double>(util::to_unix_seconds(cutoff));
    from_listing([](const EntryInfo& e, double c) { return static_cast<double>(util::to_unix_seconds(e.last_used)) >= c; },
                 cutoff_unix);
    break;
  }
  case ExportSelection::Kind::from_report: {
    auto graphs = read_launcher_report(selection.report);
    if (!graphs) throw UsageError("cannot use the report: " + graphs.error());
    for (const auto& g : *graphs) {
      if (g.status == "compiled" || g.status == "cached" || g.status == "compiled_elsewhere")
        candidates.push_back({g.key, true});
      else if (g.status == "failed" || g.status == "failed_cached") {
        if (options.include_failed) candidates.push_back({g.key, false});
        else report.left_out.push_back({g.key.str(), "the run left it failed (--include-failed exports it)"});
      } else {
        report.skipped.push_back({g.key.str(), "the run did not compile it (status '" + g.status + "')"});
      }
    }
    break;
  }
  case ExportSelection::Kind::keys:
    for (const auto& k : selection.keys) candidates.push_back({k, false});
    break;
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.key < b.key; });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const Candidate& a, const Candidate& b) { return a.key == b.key; }),
                   candidates.end());
  make_room_for_descriptors(candidates.size() * kBundleFiles.size());
  // What the trust check refuses to serve, export does not pass on either.
  std::error_code root_ec;
  if (fs::exists(fs::symlink_status(cache.root(), root_ec)))
    if (auto s = check_directory_trust(cache.root(), cache.trust(), "the cache directory"); !s)
      throw EnvironmentError(s.error());

  std::vector<Exporting> chosen;
  for (const auto& c : candidates) {
    fs::path dir = cache.entry_dir(c.key);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      report.skipped.push_back({c.key.str(), "not in the cache " + cache.root().string()});
      continue;
    }
    if (auto trusted = check_entry_trust(cache, dir); !trusted) {
      report.skipped.push_back({c.key.str(), trusted.error()});
      continue;
    }
    auto snapshot = open_entry_snapshot(dir);
    if (!snapshot) {
      report.skipped.push_back({c.key.str(), snapshot.error()});
      continue;
    }
    if (!snapshot->done && !(snapshot->failed && options.include_failed)) {
      if (snapshot->failed && !c.must_be_done)
        report.left_out.push_back({c.key.str(), "a cached failure (--include-failed exports it)"});
      else
        report.skipped.push_back({c.key.str(), snapshot->failed ? "it is a cached failure now" : "it is not done"});
      continue;
    }
    bool unverified = false;
    auto prepared = prepare_entry(c.key, std::move(*snapshot), unverified);
    if (!prepared) {
      report.skipped.push_back({c.key.str(), prepared.error()});
      continue;
    }
    if (unverified) ++report.unverified;
    chosen.push_back(std::move(*prepared));
  }

  BundleManifest manifest;
  manifest.tool_version = NPC_VERSION;
  auto now = cache.clock().now();
  manifest.created = util::format_utc(now);
  for (const auto& x : chosen) manifest.entries.push_back(x.entry);
  std::string manifest_text = serialize_manifest(manifest);
  std::time_t mtime = static_cast<std::time_t>(util::to_unix_seconds(now));

  util::AtomicFile out(output);
  if (auto s = out.open(); !s) throw EnvironmentError("cannot write the bundle: " + s.error());
  {
    ArchiveWriter w;
    if (archive_write_add_filter_zstd(w.a) < ARCHIVE_WARN)
      throw EnvironmentError("libarchive cannot write zstd here: " + w.error());
    if (archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK)
      throw EnvironmentError("libarchive cannot write tar: " + w.error());
    if (archive_write_open_fd(w.a, out.fd()) != ARCHIVE_OK)
      throw EnvironmentError("cannot write the bundle " + output.string() + ": " + w.error());
    write_member_header(w, std::string(kManifestName), manifest_text.size(), mtime);
    write_member_data(w, manifest_text);
    for (const auto& x : chosen) {
      for (const auto& [name, record] : x.entry.files) {
        std::string member = member_name(x.entry.key, name);
        write_member_header(w, member, record.bytes, mtime);
        write_member_from_fd(w, x.snapshot.files.find(name)->second.get(), record, x.entry.key.str() + "/" + name);
        report.bytes += record.bytes;
      }
      report.exported.push_back(x.entry.key.str());
      if (x.entry.failed) ++report.failed_exported;
    }
    if (archive_write_close(w.a) != ARCHIVE_OK)
      throw EnvironmentError("cannot write the bundle " + output.string() + ": " + w.error());
  }
  if (auto s = out.commit(); !s) throw EnvironmentError("cannot write the bundle: " + s.error());
  std::error_code ec;
  report.bundle_bytes = fs::file_size(output, ec);
  return report;
}

// --- import ---------------------------------------------------------------------------

int ImportReport::exit_code() const {
  if (error) return static_cast<int>(error_code);
  return rejected.empty() ? 0 : 1;
}

void remove_stale_import_staging(const Cache& cache) {
  fs::path dir = cache.private_dir();
  auto now = std::chrono::system_clock::now();
  for (const auto& name : read_dir_names(dir)) {
    if (!std::string_view(name).starts_with(kImportStagingPrefix)) continue;
    fs::path staging = dir / name;
    auto when = util::mtime(staging);
    if (!when || now - *when < kStaleStagingAge) continue;
    auto lock = util::FileLock::try_acquire(staging / kImportLockName, util::LockHolder::self(lock_tool_name()));
    if (!lock || !lock->has_value()) continue; // a running import holds it
    if (auto s = util::remove_tree(staging); !s) spdlog::debug("{}", s.error());
  }
}

namespace {

struct ArchiveReader {
  struct archive* a = archive_read_new();
  ~ArchiveReader() {
    if (a != nullptr) archive_read_free(a);
  }
  [[nodiscard]] std::string error() const {
    const char* text = archive_error_string(a);
    return text != nullptr ? text : "unknown libarchive error";
  }
};

enum class Plan { wanted, skipped, rejected };

struct Incoming {
  const BundleEntry* entry = nullptr;
  Plan plan = Plan::wanted;
  fs::path staging;                       // <staging>/<index>
  std::map<std::string, fs::path> staged; // file name -> staged path, verified
};

bool is_regular_member(struct archive_entry* e) {
  return archive_entry_filetype(e) == AE_IFREG && archive_entry_hardlink(e) == nullptr &&
         archive_entry_symlink(e) == nullptr;
}

class Importer {
public:
  Importer(const Cache& cache, const ImportOptions& options, ImportReport& report)
      : cache_(cache), options_(options), report_(report) {}

  void run(const fs::path& bundle) {
    if (auto s = cache_.ensure_root(); !s) return error(s.error(), ExitCode::environment);
    remove_stale_import_staging(cache_);
    util::UniqueFd fd(::open(bundle.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return error(util::errno_text("cannot open the bundle", bundle, errno), ExitCode::usage);

    util::TempDir staging(cache_.private_dir(), kImportStagingPrefix);
    auto lock = util::FileLock::try_acquire(staging.path() / kImportLockName,
                                            util::LockHolder::self(lock_tool_name()));
    if (!lock || !lock->has_value()) return error("cannot lock the staging folder " + staging.path().string(), ExitCode::environment);
    staging_ = staging.path();

    archive_read_support_filter_zstd(reader_.a);
    archive_read_support_format_tar(reader_.a);
    if (archive_read_open_fd(reader_.a, fd.get(), 1 << 16) != ARCHIVE_OK)
      return error("cannot read " + bundle.string() + " as a cache bundle (truncated, corrupt, or not one): " +
                       reader_.error(),
                   ExitCode::failure);
    if (!read_manifest(bundle)) return;
    plan();
    if (report_.error) return;
    stage_members();
    check_complete();
    publish_all();
  }

private:
  void error(const std::string& message, ExitCode code) {
    report_.error = message;
    report_.error_code = code;
  }

  void reject(Incoming& in, const std::string& reason) {
    if (in.plan == Plan::rejected) return;
    in.plan = Plan::rejected;
    report_.rejected.push_back({in.entry->key.str(), reason});
    std::ignore = util::remove_tree(in.staging); // frees its space now
    in.staged.clear();
  }

  void reject_stray(const std::string& key, const std::string& reason) {
    if (stray_.insert(key).second) report_.rejected.push_back({key, reason});
  }

  bool read_manifest(const fs::path& bundle) {
    struct archive_entry* e = nullptr;
    int rc = archive_read_next_header(reader_.a, &e);
    if (rc == ARCHIVE_EOF) {
      error(bundle.string() + " is empty: no manifest.json", ExitCode::failure);
      return false;
    }
    if (rc < ARCHIVE_WARN) {
      error("cannot read " + bundle.string() + " as a cache bundle (truncated, corrupt, or not one): " +
                reader_.error(),
            ExitCode::failure);
      return false;
    }
    const char* name = archive_entry_pathname(e);
    if (name == nullptr || std::string_view(name) != kManifestName || !is_regular_member(e)) {
      error(bundle.string() + " is not a cache bundle: its first member is '" + printable(name ? name : "") +
                "', not manifest.json",
            ExitCode::failure);
      return false;
    }
    if (archive_entry_size_is_set(e) && static_cast<std::uint64_t>(archive_entry_size(e)) > kMaxManifestBytes) {
      error(bundle.string() + ": the manifest is larger than " + std::to_string(kMaxManifestBytes) + " bytes; refused",
            ExitCode::failure);
      return false;
    }
    std::string text;
    std::vector<char> buffer(1 << 16);
    for (;;) {
      la_ssize_t n = archive_read_data(reader_.a, buffer.data(), buffer.size());
      if (n == 0) break;
      if (n < 0) {
        error(bundle.string() + ": cannot read the manifest: " + reader_.error(), ExitCode::failure);
        return false;
      }
      text.append(buffer.data(), static_cast<std::size_t>(n));
      if (text.size() > kMaxManifestBytes) {
        error(bundle.string() + ": the manifest is larger than " + std::to_string(kMaxManifestBytes) + " bytes; refused",
              ExitCode::failure);
        return false;
      }
    }
    auto parsed = parse_manifest(text);
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
  void plan() {
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
      } else if (locally_done(cache_.entry_dir(entries[i].key))) {
        skip(in, "already done in this cache");
      } else {
        for (const auto& [name, file] : entries[i].files) declared += file.bytes;
      }
    }
    struct statvfs fsinfo {};
    if (::statvfs(staging_.c_str(), &fsinfo) == 0) {
      std::uint64_t free_bytes = static_cast<std::uint64_t>(fsinfo.f_bavail) * fsinfo.f_frsize;
      if (declared > free_bytes)
        error("the bundle's entries need " + util::format_bytes(declared) + " (" + std::to_string(declared) +
                  " bytes) and only " + util::format_bytes(free_bytes) + " are free in " + cache_.root().string() +
                  "; nothing was imported",
              ExitCode::environment);
    }
  }

  void skip(Incoming& in, const std::string& reason) {
    in.plan = Plan::skipped;
    report_.skipped.push_back({in.entry->key.str(), reason});
  }

  void stage_members() {
    struct archive_entry* e = nullptr;
    for (;;) {
      int rc = archive_read_next_header(reader_.a, &e);
      if (rc == ARCHIVE_EOF) return;
      if (rc < ARCHIVE_WARN) {
        archive_error_ = reader_.error();
        return;
      }
      const char* raw = archive_entry_pathname(e);
      std::string name = raw != nullptr ? raw : "";
      auto member = parse_member_name(name);
      if (!member) {
        reject_stray(printable(name), "unsafe or unknown member name '" + printable(name) +
                                          "' (expected entries/neuronxcc-<version>/MODULE_<hash>+<hash>/<file>)");
        continue; // its data is skipped with the next header
      }
      auto found = by_key_.find(member->key.str());
      if (found == by_key_.end()) {
        reject_stray(member->key.str(), "member " + member->file + " of an entry the manifest does not list");
        continue;
      }
      Incoming& in = incoming_[found->second];
      if (in.plan != Plan::wanted) continue;
      if (!is_regular_member(e)) {
        reject(in, "member " + member->file + " is not a regular file (links and devices are refused)");
        continue;
      }
      auto expected = in.entry->files.find(member->file);
      if (expected == in.entry->files.end()) {
        reject(in, "member " + member->file + " is not in the manifest");
        continue;
      }
      if (in.staged.contains(member->file)) {
        reject(in, "member " + member->file + " appears twice");
        continue;
      }
      if (archive_entry_size_is_set(e) && static_cast<std::uint64_t>(archive_entry_size(e)) != expected->second.bytes) {
        reject(in, "member " + member->file + " has " + std::to_string(archive_entry_size(e)) +
                       " bytes; the manifest says " + std::to_string(expected->second.bytes));
        continue;
      }
      if (!stage_member(in, member->file, expected->second)) return; // the archive is unreadable from here
    }
  }

  // Copies one member's data into the staging folder, at most the size the
  // manifest gives, hashing it. False when the archive cannot be read on.
  bool stage_member(Incoming& in, const std::string& file, const BundleFile& expected) {
    if (auto s = util::ensure_dir(in.staging, 0700); !s) {
      reject(in, "cannot stage it: " + s.error());
      return true;
    }
    fs::path path = in.staging / file;
    // The cache's files are 0666 less the umask (group-writable in a shared cache).
    util::UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666));
    if (!out.valid()) {
      reject(in, util::errno_text("cannot stage it:", path, errno));
      return true;
    }
    util::Sha256 sha;
    std::uint64_t total = 0;
    std::vector<char> buffer(kChunk);
    for (;;) {
      la_ssize_t n = archive_read_data(reader_.a, buffer.data(), buffer.size());
      if (n == 0) break;
      if (n < 0) {
        archive_error_ = reader_.error();
        reject(in, "member " + file + " is truncated or corrupt: " + *archive_error_);
        return false;
      }
      total += static_cast<std::uint64_t>(n);
      if (total > expected.bytes) {
        reject(in, "member " + file + " is larger than the " + std::to_string(expected.bytes) +
                       " bytes the manifest says");
        return true;
      }
      std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
      sha.update(chunk);
      if (!util::write_all(out.get(), chunk)) {
        // Not the bundle's fault: the local disk.
        error(util::errno_text("cannot stage the bundle in", in.staging, errno), ExitCode::environment);
        reject(in, "could not be staged (local disk)");
        return false;
      }
    }
    if (::close(out.release()) != 0) {
      error(util::errno_text("cannot stage the bundle in", in.staging, errno), ExitCode::environment);
      reject(in, "could not be staged (local disk)");
      return false;
    }
    if (total != expected.bytes) {
      reject(in, "member " + file + " has " + std::to_string(total) + " bytes; the manifest says " +
                     std::to_string(expected.bytes));
      return true;
    }
    if (sha.hex_digest() != expected.sha256) {
      reject(in, "member " + file + " does not match its SHA-256 in the manifest (corrupt)");
      return true;
    }
    in.staged[file] = path;
    return true;
  }

  void check_complete() {
    for (auto& in : incoming_) {
      if (in.plan != Plan::wanted) continue;
      for (const auto& [name, file] : in.entry->files) {
        if (in.staged.contains(name)) continue;
        if (archive_error_)
          reject(in, "member " + name + " is missing: the bundle is truncated or corrupt (" + *archive_error_ + ")");
        else
          reject(in, "member " + name + " is missing from the bundle");
        break;
      }
    }
    if (archive_error_) {
      bool named = std::any_of(report_.rejected.begin(), report_.rejected.end(), [&](const KeyReason& r) {
        return r.reason.find(*archive_error_) != std::string::npos;
      });
      if (!named)
        spdlog::warn("the bundle ends in a damaged part ({}); every entry before it was whole", *archive_error_);
    }
  }

  void publish_all() {
    std::vector<Incoming*> busy;
    for (auto& in : incoming_)
      if (in.plan == Plan::wanted && !report_.error) {
        if (!publish(in, /*wait=*/false)) busy.push_back(&in);
      }
    for (auto* in : busy)
      if (!report_.error) publish(*in, /*wait=*/true);
  }

  // False when the entry's lock is held and wait is false.
  bool publish(Incoming& in, bool wait) {
    const CacheKey& key = in.entry->key;
    fs::path entry_dir = cache_.entry_dir(key);
    EntryLock lock;
    if (auto trusted = check_entry_trust(cache_, entry_dir); !trusted) {
      skip(in, trusted.error());
      spdlog::warn("{}", trusted.error());
      return true;
    }
    if (!wait) {
      if (auto s = util::ensure_dir(entry_dir); !s) {
        error(s.error(), ExitCode::environment);
        return true;
      }
      auto taken = cache_.try_lock_entry(entry_dir);
      if (!taken) {
        error(taken.error(), ExitCode::environment);
        return true;
      }
      if (!taken->has_value()) return false;
      lock = std::move(**taken);
    } else {
      auto taken = cache_.lock_entry(entry_dir, options_.lock_wait);
      if (!taken) {
        if (taken.error().find("timed out") == std::string::npos) {
          error(taken.error(), ExitCode::environment);
          return true;
        }
        skip(in, "being compiled here (" + taken.error() + "); left to that compile");
        return true;
      }
      lock = std::move(*taken);
    }
    auto info = cache_.inspect(entry_dir);
    if (!info) {
      error(info.error(), ExitCode::environment);
      return true;
    }
    if (info->state == EntryState::done) {
      skip(in, "already done in this cache");
      return true;
    }
    if (in.entry->failed && info->has_log) {
      skip(in, "a failure is cached here already");
      return true;
    }
    IncomingEntry incoming;
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
        if (auto meta = parse_entry_meta(*text)) incoming.attempts = std::move(meta->attempts);
    }
    if (auto s = publish_incoming(cache_, entry_dir, incoming); !s) {
      error("cannot publish " + key.str() + ": " + s.error(), ExitCode::environment);
      return true;
    }
    report_.imported.push_back(key.str());
    return true;
  }

  const Cache& cache_;
  const ImportOptions& options_;
  ImportReport& report_;
  ArchiveReader reader_;
  fs::path staging_;
  ParsedManifest manifest_;
  std::vector<Incoming> incoming_;
  std::map<std::string, std::size_t> by_key_;
  std::set<std::string> stray_;
  std::optional<std::string> archive_error_;
};

} // namespace

ImportReport import_bundle(const Cache& cache, const fs::path& bundle, const ImportOptions& options) {
  ImportReport report;
  Importer importer(cache, options, report);
  importer.run(bundle);
  return report;
}

// --- reports as JSON -----------------------------------------------------------------

namespace {
json key_reasons(const std::vector<KeyReason>& list) {
  json out = json::array();
  for (const auto& r : list) out.push_back({{"key", r.key}, {"reason", r.reason}});
  return out;
}
} // namespace

json to_json(const ExportReport& report) {
  return {{"output", report.output.string()},
          {"entries", report.exported.size()},
          {"failed_entries", report.failed_exported},
          {"unverified", report.unverified},
          {"bytes", report.bytes},
          {"bundle_bytes", report.bundle_bytes},
          {"exported", report.exported},
          {"skipped", key_reasons(report.skipped)},
          {"left_out", key_reasons(report.left_out)}};
}

json to_json(const ImportReport& report) {
  return {{"imported", report.imported.size()},
          {"skipped", report.skipped.size()},
          {"rejected", key_reasons(report.rejected)},
          {"imported_keys", report.imported},
          {"skipped_entries", key_reasons(report.skipped)},
          {"bundle", {{"tool_version", report.tool_version}, {"created", report.created}}},
          {"error", report.error ? json(*report.error) : json(nullptr)}};
}

} // namespace npc::cache
