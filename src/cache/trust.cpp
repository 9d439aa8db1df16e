#include <npc/cache/trust.hpp>

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

TrustMode trust_mode_from_environment() {
  if (util::env_flag(kTrustedCacheEnv)) return TrustMode::trusted;
  if (util::env_flag(kSharedCacheEnv)) return TrustMode::shared_by_group;
  return TrustMode::private_to_user;
}

unsigned root_mode(TrustMode mode) { return mode == TrustMode::shared_by_group ? 02770 : 0700; }

Status check_directory_trust(const fs::path& dir, TrustMode mode, const char* what, Links links) {
  if (mode == TrustMode::trusted) return ok_status();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return fail(util::errno_text("cannot stat", dir, errno));
  if (S_ISLNK(st.st_mode)) {
    if (links == Links::refuse)
      return fail(std::string(what) + " " + dir.string() + " is a symlink; refusing to use it (set " +
                  kTrustedCacheEnv + "=1 if you made it and trust what it points to)");
    // Whoever owns a link decides where it points, as whoever owns a
    // directory decides what it holds: the link must be yours or root's,
    // and what it points to passes the same checks as a directory would.
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
      return fail(std::string(what) + " " + dir.string() + " is a symlink owned by uid " + std::to_string(st.st_uid) +
                  ", neither you (uid " + std::to_string(::geteuid()) + ") nor root; refusing: its owner can point "
                  "it anywhere (make the link yourself, or set " + kTrustedCacheEnv + "=1)");
    if (::stat(dir.c_str(), &st) != 0) return fail(util::errno_text("cannot follow the symlink", dir, errno));
  }
  if (!S_ISDIR(st.st_mode)) return fail(std::string(what) + " " + dir.string() + " is not a directory");
  if (mode == TrustMode::private_to_user && st.st_uid != ::geteuid())
    return fail(std::string(what) + " " + dir.string() + " is owned by uid " + std::to_string(st.st_uid) +
                ", not by you (uid " + std::to_string(::geteuid()) + "); refusing: whoever owns it decides what "
                "NEFF you run (set " + kSharedCacheEnv + "=1 for a cache shared by a group, or " +
                kTrustedCacheEnv + "=1)");
  return ok_status();
}

} // namespace npc::cache
