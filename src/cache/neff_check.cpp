#include <npc/cache/neff_check.hpp>

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

Result<Integrity> check_neff_in_place(const fs::path& entry_dir, TrustMode trust, int copy_to) {
  if (auto s = check_directory_trust(entry_dir, trust, "the cache entry"); !s) return fail(s.error());
  auto meta = read_entry_meta(entry_dir);
  if (!meta) return fail(meta.error());
  fs::path neff = entry_dir / kNeffFile;
  util::UniqueFd fd(util::open_for_reading(neff, O_NOFOLLOW));
  if (!fd.valid()) return fail(util::errno_text("cannot open", neff, errno));
  if (meta->neff_bytes) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return fail(util::errno_text("cannot stat", neff, errno));
    if (static_cast<std::uint64_t>(st.st_size) != *meta->neff_bytes) return Integrity::mismatch;
  }
  auto digest = util::sha256_fd(fd.get(), copy_to);
  if (!digest) return fail("cannot read " + neff.string() + ": " + digest.error());
  if (!meta->neff_sha256) return Integrity::unverified;
  if (digest->sha256 != *meta->neff_sha256) return Integrity::mismatch;
  if (meta->neff_bytes && digest->size != *meta->neff_bytes) return Integrity::mismatch;
  return Integrity::ok;
}

} // namespace npc::cache
