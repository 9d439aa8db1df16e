#pragma once
// What a cache directory must look like before we read from it or write to
// it. Whoever can write a cache decides what NEFF another user's training run
// loads, so by default the cache is private to the user: created 0700, and an
// existing root or entry that is a symlink, or owned by another user, is
// refused. Two explicit ways out:
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

// Checks an existing directory (the root or an entry) against the mode; the
// failure says what is wrong and how to accept it.
[[nodiscard]] Status check_directory_trust(const fs::path& dir, TrustMode mode, const char* what);

} // namespace npc::cache
