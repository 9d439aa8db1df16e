#pragma once
// Reading a bundle (internal to npc_bundle): libarchive behind one small
// class, so that the importer sees member headers and data checked against
// the manifest, never an archive handle. This header does not include
// libarchive's: only reader.cpp does.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <npc/bundle/manifest.hpp>
#include <npc/util/result.hpp>

struct archive;

namespace npc::bundle {

namespace fs = std::filesystem;

// A member's header as the archive gives it: nothing in it is trusted yet.
struct MemberHeader {
  std::string name;                 // as written: may hold anything
  bool regular = false;             // a plain file: no directory, device, symlink or hard link
  bool directory = false;           // a folder (GNU tar and others write one per folder)
  std::optional<std::int64_t> size; // when the header gives one
};

// How copying a member's data against its manifest record ended.
enum class CopyEnd {
  verified,       // exactly the record's size and SHA-256
  too_long,       // more than the record's size: copying stopped there
  wrong_size,     // the archive's data ended short of the record's size
  wrong_digest,   // the record's size, other bytes
  damaged,        // the archive cannot be read on (BundleReader::damage() says why)
  write_failed,   // the output could not be written (errno in write_errno)
};
struct CopyResult {
  CopyEnd end = CopyEnd::verified;
  std::uint64_t bytes = 0; // read from the archive
  int write_errno = 0;
};

// One pass over a bundle, front to back, as libarchive allows: the manifest
// first, then each member's header and, at most once, its data (data not
// read is skipped with the next header).
class BundleReader {
public:
  BundleReader();
  ~BundleReader();
  BundleReader(const BundleReader&) = delete;
  BundleReader& operator=(const BundleReader&) = delete;

  // Starts reading the bundle open at `fd` (named `bundle` in messages); the
  // message when it cannot be read as a tar (+ zstd) at all.
  [[nodiscard]] Status open(int fd, const fs::path& bundle);
  // The first member, which must be manifest.json of at most
  // kMaxManifestBytes: its text, or why the file is no bundle.
  [[nodiscard]] Result<std::string> read_manifest();
  // The next member's header; nullopt after the last one, or when the
  // archive cannot be read on (damage() then says why).
  [[nodiscard]] std::optional<MemberHeader> next_member();
  // Copies the current member's data to `out_fd`, counting and hashing it
  // against `expected`; never more than expected.bytes are written.
  [[nodiscard]] CopyResult copy_member(int out_fd, const BundleFile& expected);
  // Why the archive could not be read to its end, in libarchive's words;
  // nullopt while it reads well.
  [[nodiscard]] const std::optional<std::string>& damage() const { return damage_; }

private:
  [[nodiscard]] std::string error() const;
  // "cannot read <bundle> as a cache bundle (...): <libarchive's words>"
  [[nodiscard]] std::string not_a_bundle() const;

  struct archive* a_;
  fs::path bundle_;
  std::optional<std::string> damage_;
};

} // namespace npc::bundle
