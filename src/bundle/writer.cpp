// Export: reading the chosen entries consistently and writing them, with
// their manifest, into one tar + zstd file.

#include <npc/bundle/bundle.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <sys/resource.h>
#include <unistd.h>
#include <variant>

#include <archive.h>
#include <archive_entry.h>

#include <npc/bundle/manifest.hpp>
#include <npc/bundle/selection.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/entry.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/trust.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::bundle {

using cache::CacheKey;
using cache::EntrySnapshot;

namespace {

// Files are streamed into the archive in pieces of this size: few calls for
// a NEFF of hundreds of MB, little memory.
constexpr std::size_t kChunk = 1 << 20;
// npc-entry.json and compile_flags.json are a few KiB; anything far larger
// is not ours.
constexpr std::uint64_t kMaxRecordBytes = 16 * 1024 * 1024;
// Descriptors the process needs besides the entries' files: standard
// streams, the bundle, logging, libarchive's own.
constexpr rlim_t kSpareDescriptors = 64;

// --- the tar ----------------------------------------------------------------------

// A pax tar compressed with zstd, written through libarchive onto an open
// descriptor. Every failure throws: half a bundle is never kept (the caller
// writes to a temp file).
class TarWriter {
public:
  TarWriter(int fd, const fs::path& output) : output_(output) {
    if (archive_write_add_filter_zstd(a_.get()) < ARCHIVE_WARN)
      throw EnvironmentError("libarchive cannot write zstd here: " + error());
    if (archive_write_set_format_pax_restricted(a_.get()) != ARCHIVE_OK)
      throw EnvironmentError("libarchive cannot write tar: " + error());
    // No padding to a 10 KiB block on a device or pipe: the bundle is the
    // same bytes wherever it is written.
    archive_write_set_bytes_in_last_block(a_.get(), 1);
    if (archive_write_open_fd(a_.get(), fd) != ARCHIVE_OK)
      throw EnvironmentError("cannot write the bundle " + output_.string() + ": " + error());
  }

  // A member whose data is in memory.
  void add(const std::string& name, std::string_view data, std::time_t mtime) {
    write_header(name, data.size(), mtime);
    write_data(data);
  }

  // Streams one file of a snapshot into the archive, checking it is still
  // what the manifest says (it was hashed through the same descriptor).
  // `what` names it in messages.
  void add_from_fd(const std::string& name, int fd, const BundleFile& expected, std::time_t mtime,
                   const std::string& what) {
    write_header(name, expected.bytes, mtime);
    std::vector<char> buffer(kChunk);
    util::Sha256 sha;
    std::uint64_t total = 0;
    off_t offset = 0;
    for (;;) {
      ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw EnvironmentError("cannot read " + what + ": " + std::strerror(errno));
      }
      if (n == 0) break;
      auto size = static_cast<std::uint64_t>(n);
      if (total + size > expected.bytes) break;
      std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
      sha.update(chunk);
      write_data(chunk);
      total += size;
      offset += n;
    }
    if (total != expected.bytes || sha.hex_digest() != expected.sha256)
      throw Error(what + " was modified in place while it was being exported; nothing was written (run the export again)");
  }

  // Writes the end of the archive and flushes the compressor.
  void close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK)
      throw EnvironmentError("cannot write the bundle " + output_.string() + ": " + error());
  }

  // What reached the output (compressed), counted as written: a bundle
  // written through a device or FIFO has no file size to look at after.
  [[nodiscard]] std::uint64_t bytes_written() { return static_cast<std::uint64_t>(archive_filter_bytes(a_.get(), -1)); }

private:
  struct Free {
    void operator()(struct archive* a) const { archive_write_free(a); }
  };
  struct EntryFree {
    void operator()(struct archive_entry* e) const { archive_entry_free(e); }
  };

  [[nodiscard]] std::string error() const {
    const char* text = archive_error_string(a_.get());
    std::string message = text != nullptr ? text : "unknown libarchive error";
    // libarchive says "Write error" for a full disk or /dev/full: add why.
    int err = archive_errno(a_.get());
    if (err > 0 && message.find(std::strerror(err)) == std::string::npos) message += ": " + std::string(std::strerror(err));
    return message;
  }

  void write_header(const std::string& name, std::uint64_t size, std::time_t mtime) {
    std::unique_ptr<struct archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), mtime, 0);
    if (archive_write_header(a_.get(), e.get()) < ARCHIVE_WARN)
      throw EnvironmentError("cannot write the bundle: " + error());
  }

  void write_data(std::string_view data) {
    while (!data.empty()) {
      la_ssize_t n = archive_write_data(a_.get(), data.data(), data.size());
      if (n <= 0) throw EnvironmentError("cannot write the bundle: " + error());
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  std::unique_ptr<struct archive, Free> a_{archive_write_new()};
  fs::path output_;
};

// --- reading the entries ---------------------------------------------------------

// An entry on its way into the bundle: its manifest record, and its files
// kept open from hashing to writing.
struct Exporting {
  BundleEntry entry;
  EntrySnapshot snapshot;
};

// Each entry's files stay open from hashing to writing: raise the limit on
// open files as far as allowed, and refuse a selection that does not fit.
void make_room_for_descriptors(std::size_t needed) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t want = static_cast<rlim_t>(needed) + kSpareDescriptors;
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

// What the trust check refuses to serve, export does not pass on either.
void check_root_trust(const cache::Cache& cache) {
  std::error_code root_ec;
  if (fs::exists(fs::symlink_status(cache.root(), root_ec)))
    if (auto s = cache::check_directory_trust(cache.root(), cache.trust(), "the cache directory",
                                                cache::Links::follow_owned); !s)
      throw EnvironmentError(s.error());
}

// Hashes a snapshot's files and builds its manifest record; the reason it
// cannot be exported otherwise. `unverified`: a done entry with no integrity
// record, whose checksum is taken now.
Result<Exporting> prepare_entry(const CacheKey& key, EntrySnapshot snapshot, bool& unverified) {
  Exporting out;
  out.entry.key = key;
  out.entry.failed = !snapshot.done;
  // A done entry carries no stale model.log; a failed one has no NEFF.
  if (snapshot.done) snapshot.files.erase(std::string(cache::kLogFile));
  else snapshot.files.erase(std::string(cache::kNeffFile));

  std::optional<cache::EntryMeta> meta;
  if (auto it = snapshot.files.find(cache::kMetaFile); it != snapshot.files.end()) {
    auto text = util::read_fd(it->second.get(), kMaxRecordBytes);
    if (!text) return fail("cannot read npc-entry.json: " + text.error());
    auto parsed = cache::parse_entry_meta(*text);
    if (!parsed) return fail("npc-entry.json is corrupt (" + parsed.error() + ")");
    meta = std::move(*parsed);
  }
  for (const auto& [name, fd] : snapshot.files) {
    auto digest = util::sha256_fd(fd.get());
    if (!digest) return fail("cannot read " + name + ": " + digest.error());
    out.entry.files[name] = BundleFile{digest->size, digest->sha256};
  }
  if (snapshot.done) {
    const BundleFile& neff = out.entry.files.at(std::string(cache::kNeffFile));
    if (meta && meta->neff_sha256) {
      if (*meta->neff_sha256 != neff.sha256 || (meta->neff_bytes && *meta->neff_bytes != neff.bytes))
        return fail("its NEFF does not match its integrity record (neuron_cache verify --repair recompiles it)");
    } else {
      unverified = true; // written by another tool: the bundle's checksum is taken now
    }
  }
  if (auto it = snapshot.files.find(cache::kFlagsFile); it != snapshot.files.end()) {
    auto text = util::read_fd(it->second.get(), kMaxRecordBytes);
    if (text)
      if (auto flags = cache::parse_compile_flags(*text)) out.entry.flags = std::move(*flags);
  }
  out.snapshot = std::move(snapshot);
  return out;
}

// Reads one candidate; the reason it is not exported otherwise, with where
// the report lists it (skipped: a problem; left out: a failure not asked for).
enum class NotTaken { skipped, left_out };
struct Refusal {
  NotTaken list;
  std::string reason;
};
std::variant<Exporting, Refusal> take_entry(const cache::Cache& cache, const ExportCandidate& c,
                                            const ExportOptions& options, bool& unverified) {
  fs::path dir = cache.entry_dir(c.key);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Refusal{NotTaken::skipped, "not in the cache " + cache.root().string()};
  if (auto trusted = cache.entry(dir).check_trust(); !trusted) return Refusal{NotTaken::skipped, trusted.error()};
  auto snapshot = cache::Entry::open_snapshot(dir);
  if (!snapshot) return Refusal{NotTaken::skipped, snapshot.error()};
  if (!snapshot->done && !(snapshot->failed && options.include_failed)) {
    if (snapshot->failed && !c.must_be_done)
      return Refusal{NotTaken::left_out, "a cached failure (--include-failed exports it)"};
    return Refusal{NotTaken::skipped, snapshot->failed ? "it is a cached failure now" : "it is not done"};
  }
  auto prepared = prepare_entry(c.key, std::move(*snapshot), unverified);
  if (!prepared) return Refusal{NotTaken::skipped, prepared.error()};
  return std::move(*prepared);
}

// Every candidate that can be exported, in candidate order; the others are
// recorded in the report.
std::vector<Exporting> take_entries(const cache::Cache& cache, const std::vector<ExportCandidate>& candidates,
                                    const ExportOptions& options, ExportReport& report) {
  std::vector<Exporting> chosen;
  for (const auto& c : candidates) {
    bool unverified = false;
    auto taken = take_entry(cache, c, options, unverified);
    if (auto* refusal = std::get_if<Refusal>(&taken)) {
      auto& list = refusal->list == NotTaken::left_out ? report.left_out : report.skipped;
      list.push_back({c.key.str(), std::move(refusal->reason)});
      continue;
    }
    if (unverified) ++report.unverified;
    chosen.push_back(std::move(std::get<Exporting>(taken)));
  }
  return chosen;
}

// --- writing the bundle --------------------------------------------------------------

// The manifest first, then every entry's files; at `output` as util::OutputFile
// writes (atomically for a file, through a device or FIFO).
void write_bundle(const cache::Cache& cache, const std::vector<Exporting>& chosen, const fs::path& output,
                  ExportReport& report) {
  BundleManifest manifest;
  manifest.tool_version = NPC_VERSION;
  auto now = cache.clock().now();
  manifest.created = util::format_utc(now);
  for (const auto& x : chosen) manifest.entries.push_back(x.entry);
  std::string manifest_text = serialize_manifest(manifest);
  std::time_t mtime = static_cast<std::time_t>(util::to_unix_seconds(now));

  util::OutputFile out(output);
  if (auto s = out.open(); !s) throw EnvironmentError("cannot write the bundle: " + s.error());
  {
    TarWriter tar(out.fd(), output);
    tar.add(std::string(kManifestName), manifest_text, mtime);
    for (const auto& x : chosen) {
      for (const auto& [name, record] : x.entry.files) {
        tar.add_from_fd(member_name(x.entry.key, name), x.snapshot.files.find(name)->second.get(), record, mtime,
                        x.entry.key.str() + "/" + name);
        report.bytes += record.bytes;
      }
      report.exported.push_back(x.entry.key.str());
      if (x.entry.failed) ++report.failed_exported;
    }
    tar.close();
    report.bundle_bytes = tar.bytes_written();
  }
  if (auto s = out.commit(); !s) throw EnvironmentError("cannot write the bundle: " + s.error());
}

} // namespace

ExportReport export_bundle(const cache::Cache& cache, const ExportSelection& selection, const fs::path& output,
                           const ExportOptions& options) {
  ExportReport report;
  report.output = output;
  auto candidates = select_candidates(cache, selection, options, report);
  make_room_for_descriptors(candidates.size() * cache::kTransferFiles.size());
  check_root_trust(cache);
  auto chosen = take_entries(cache, candidates, options, report);
  write_bundle(cache, chosen, output, report);
  return report;
}

} // namespace npc::bundle
