#include <npc/bundle/reader.hpp>

#include <cerrno>
#include <string_view>
#include <vector>

#include <archive.h>
#include <archive_entry.h>

#include <npc/bundle/printable.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::bundle {

namespace {

// libarchive reads the file in blocks of this size.
constexpr std::size_t kReadBlock = 1 << 16;
// The manifest is read in pieces of this size (it is small).
constexpr std::size_t kManifestChunk = 1 << 16;
// A member's data is copied in pieces of this size: few calls for a NEFF
// of hundreds of MB, little memory.
constexpr std::size_t kDataChunk = 1 << 20;

bool is_regular(struct archive_entry* e) {
  return archive_entry_filetype(e) == AE_IFREG && archive_entry_hardlink(e) == nullptr &&
         archive_entry_symlink(e) == nullptr;
}

} // namespace

BundleReader::BundleReader() : a_(archive_read_new()) {}

BundleReader::~BundleReader() {
  if (a_ != nullptr) archive_read_free(a_);
}

std::string BundleReader::error() const {
  const char* text = archive_error_string(a_);
  return text != nullptr ? text : "unknown libarchive error";
}

std::string BundleReader::not_a_bundle() const {
  return "cannot read " + bundle_.string() + " as a cache bundle (truncated, corrupt, or not one): " + error();
}

Status BundleReader::open(int fd, const fs::path& bundle) {
  bundle_ = bundle;
  archive_read_support_filter_zstd(a_);
  archive_read_support_format_tar(a_);
  if (archive_read_open_fd(a_, fd, kReadBlock) != ARCHIVE_OK) return fail(not_a_bundle());
  return ok_status();
}

Result<std::string> BundleReader::read_manifest() {
  struct archive_entry* e = nullptr;
  int rc = archive_read_next_header(a_, &e);
  if (rc == ARCHIVE_EOF) return fail(bundle_.string() + " is empty: no manifest.json");
  if (rc < ARCHIVE_WARN) return fail(not_a_bundle());
  const char* name = archive_entry_pathname(e);
  if (name == nullptr || std::string_view(name) != kManifestName || !is_regular(e))
    return fail(bundle_.string() + " is not a cache bundle: its first member is '" + printable(name ? name : "") +
                "', not manifest.json");
  std::string too_large =
      bundle_.string() + ": the manifest is larger than " + std::to_string(kMaxManifestBytes) + " bytes; refused";
  if (archive_entry_size_is_set(e) && static_cast<std::uint64_t>(archive_entry_size(e)) > kMaxManifestBytes)
    return fail(too_large);
  std::string text;
  std::vector<char> buffer(kManifestChunk);
  for (;;) {
    la_ssize_t n = archive_read_data(a_, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) return fail(bundle_.string() + ": cannot read the manifest: " + error());
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (text.size() > kMaxManifestBytes) return fail(too_large);
  }
  return text;
}

std::optional<MemberHeader> BundleReader::next_member() {
  struct archive_entry* e = nullptr;
  int rc = archive_read_next_header(a_, &e);
  if (rc == ARCHIVE_EOF) return std::nullopt;
  if (rc < ARCHIVE_WARN) {
    damage_ = error();
    return std::nullopt;
  }
  MemberHeader header;
  const char* raw = archive_entry_pathname(e);
  header.name = raw != nullptr ? raw : "";
  header.regular = is_regular(e);
  header.directory = archive_entry_filetype(e) == AE_IFDIR;
  if (archive_entry_size_is_set(e)) header.size = archive_entry_size(e);
  return header;
}

CopyResult BundleReader::copy_member(int out_fd, const BundleFile& expected) {
  CopyResult result;
  util::Sha256 sha;
  std::vector<char> buffer(kDataChunk);
  for (;;) {
    la_ssize_t n = archive_read_data(a_, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) {
      damage_ = error();
      result.end = CopyEnd::damaged;
      return result;
    }
    result.bytes += static_cast<std::uint64_t>(n);
    if (result.bytes > expected.bytes) {
      result.end = CopyEnd::too_long;
      return result;
    }
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    sha.update(chunk);
    if (!util::write_all(out_fd, chunk)) {
      result.write_errno = errno;
      result.end = CopyEnd::write_failed;
      return result;
    }
  }
  if (result.bytes != expected.bytes) result.end = CopyEnd::wrong_size;
  else if (sha.hex_digest() != expected.sha256) result.end = CopyEnd::wrong_digest;
  return result;
}

} // namespace npc::bundle
