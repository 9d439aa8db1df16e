#include <npc/cache/entry_transfer.hpp>

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npc/cache/trust.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

namespace {

bool same_inode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Renames src to dst; across filesystems, copies and removes src.
Status move_file(const fs::path& src, const fs::path& dst) {
  if (::rename(src.c_str(), dst.c_str()) == 0) return ok_status();
  if (errno != EXDEV) return fail(util::errno_text("cannot publish", dst, errno));
  util::UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in.valid()) return fail(util::errno_text("cannot open", src, errno));
  util::AtomicFile out(dst);
  if (auto s = out.open(); !s) return s;
  if (auto d = util::sha256_fd(in.get(), out.fd()); !d) return fail("cannot copy to " + dst.string() + ": " + d.error());
  if (auto s = out.commit(); !s) return s;
  std::ignore = ::unlink(src.c_str());
  return ok_status();
}

// Publishes src at dst unless dst exists (then the existing file stays).
Status place_if_absent(const fs::path& src, const fs::path& dst) {
  if (::link(src.c_str(), dst.c_str()) == 0) {
    std::ignore = ::unlink(src.c_str());
    return ok_status();
  }
  if (errno == EEXIST) return ok_status();
  struct stat st {};
  if (::lstat(dst.c_str(), &st) == 0) return ok_status();
  return move_file(src, dst); // a filesystem without hard links
}

} // namespace

// --- snapshot and publish ------------------------------------------------------

Result<EntrySnapshot> open_entry_snapshot(const fs::path& entry_dir) {
  const fs::path done_path = entry_dir / kDoneFile;
  for (int attempt = 0; attempt < 5; ++attempt) {
    struct stat done_before {}, done_after {};
    bool had_done = ::lstat(done_path.c_str(), &done_before) == 0;
    if (!had_done && errno != ENOENT) return fail(util::errno_text("cannot read", done_path, errno));
    EntrySnapshot snapshot;
    std::map<std::string, struct stat> opened;
    for (auto name : kTransferFiles) {
      fs::path path = entry_dir / name;
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP) continue; // absent, or a symlink: not ours to follow
        return fail(util::errno_text("cannot open", path, errno));
      }
      util::UniqueFd owned(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) return fail(util::errno_text("cannot stat", path, errno));
      if (!S_ISREG(st.st_mode)) continue;
      opened.emplace(std::string(name), st);
      snapshot.files.emplace(std::string(name), std::move(owned));
    }
    bool has_done = ::lstat(done_path.c_str(), &done_after) == 0;
    bool consistent = had_done == has_done && (!has_done || same_inode(done_before, done_after));
    for (const auto& [name, st] : opened) {
      struct stat now {};
      if (::lstat((entry_dir / name).c_str(), &now) != 0 || !same_inode(now, st)) consistent = false;
    }
    if (!consistent) continue; // published, demoted or removed meanwhile: look again
    snapshot.done = has_done && snapshot.files.contains(kNeffFile);
    snapshot.failed = !has_done && snapshot.files.contains(kLogFile);
    return snapshot;
  }
  return fail("the entry kept changing while it was read");
}

Status check_entry_trust(const Cache& cache, const fs::path& entry_dir) {
  for (const fs::path& dir : {entry_dir.parent_path(), entry_dir}) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) continue; // created by us, under the checked root
    if (auto s = check_directory_trust(dir, cache.trust(), "the cache entry"); !s) return s;
  }
  return ok_status();
}

Status publish_incoming(const Cache& cache, const fs::path& entry_dir, const IncomingEntry& incoming) {
  if (auto s = util::ensure_dir(entry_dir); !s) return s;
  if (incoming.graph)
    if (auto s = place_if_absent(*incoming.graph, entry_dir / kGraphFile); !s) return s;
  if (incoming.flags)
    if (auto s = place_if_absent(*incoming.flags, entry_dir / kFlagsFile); !s) return s;
  auto local = read_entry_meta(entry_dir);
  EntryMeta record = local ? std::move(*local) : EntryMeta{};
  record.attempts.insert(record.attempts.end(), incoming.attempts.begin(), incoming.attempts.end());
  std::error_code ec;
  record.graph_bytes = fs::file_size(entry_dir / kGraphFile, ec);
  if (ec) record.graph_bytes = 0;
  if (incoming.neff) {
    // As Cache::publish_success: the done marker goes first and comes last.
    std::ignore = ::unlink((entry_dir / kDoneFile).c_str());
    if (auto s = move_file(*incoming.neff, entry_dir / kNeffFile); !s) return s;
    record.neff_sha256 = incoming.neff_sha256;
    record.neff_bytes = incoming.neff_bytes;
    if (auto s = write_entry_meta(entry_dir, record); !s) return s;
    if (auto s = util::write_file_atomic(entry_dir / kDoneFile, ""); !s) return s;
    std::ignore = ::unlink((entry_dir / kLogFile).c_str());
  } else if (incoming.log) {
    record.neff_sha256.reset();
    record.neff_bytes.reset();
    if (auto s = write_entry_meta(entry_dir, record); !s) return s;
    if (auto s = move_file(*incoming.log, entry_dir / kLogFile); !s) return s;
  }
  return cache.touch(entry_dir);
}

} // namespace npc::cache
