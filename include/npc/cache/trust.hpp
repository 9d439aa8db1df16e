#pragma once
// What a cache directory must look like before we read from it or write to
// it. Whoever can write a cache decides what NEFF another user's training run
// loads, so by default the cache is private to the user: created 0700, and an
// existing root or entry that is a symlink, or owned by another user, is
// refused. The root itself may be a link (to an NVMe or FSx mount, say) that
// you or root own: what it points to is then checked as the root. An entry
// is never a link: neither we nor the framework make one. Two explicit ways
// out:
//   NEURON_COMPILE_CACHE_SHARED=1   a cache shared by a group: the root is
//                                   created group-writable with the setgid bit
//                                   (2770), entries of other users are accepted
//                                   (symlinks still are not);
//   NEURON_COMPILE_CACHE_TRUSTED=1  accept the cache as it is, symlinks and
//                                   owners included.

#include <filesystem>
#include <string>

#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

enum class TrustMode { private_to_user, shared_by_group, trusted };

inline constexpr const char* kSharedCacheEnv = "NEURON_COMPILE_CACHE_SHARED";
inline constexpr const char* kTrustedCacheEnv = "NEURON_COMPILE_CACHE_TRUSTED";

[[nodiscard]] TrustMode trust_mode_from_environment();
// Mode for a root we create.
[[nodiscard]] unsigned root_mode(TrustMode mode);

// Whether `dir` may be a symlink: the cache root may (one owned by you or
// root, followed), an entry may not.
enum class Links { refuse, follow_owned };

// Checks an existing directory (the root or an entry) against the mode; the
// failure says what is wrong and how to accept it.
[[nodiscard]] Status check_directory_trust(const fs::path& dir, TrustMode mode, const char* what,
                                           Links links = Links::refuse);

} // namespace npc::cache
