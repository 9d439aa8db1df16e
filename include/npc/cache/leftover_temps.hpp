#pragma once
// Temporary files and folders that a writer which died (kill -9, the OOM
// killer, a lost node) left in a cache entry. A compile's work folder may
// hold gigabytes of artifacts, so every tool that may judge them dead clears
// them: the next compile of the entry, eviction, clear-locks and verify --repair.
//
// Whether a temp is dead: a compile makes its work folder and its copied NEFF
// only while it holds the entry's lock, so whoever holds the lock knows those
// are dead, whatever their age. Any other temp (an atomic write's file) is
// judged by age only.

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/clock.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// What a compile keeps in its entry while it runs (util::kTempPrefix first,
// so every listing knows them as temporary).
inline constexpr std::string_view kCompileWorkPrefix = ".tmp-work-";
inline constexpr std::string_view kCompileNeffPrefix = ".tmp-neff-";

// A temp this old in an entry nobody holds is left by a dead writer.
inline constexpr auto kStaleTempAge = std::chrono::minutes(10);

enum class LockHeld { no, yes };

struct LeftoverTemp {
  fs::path path;
  std::string error; // why it could not be removed; empty when it was
};

// Which of `temp_names` (names in `entry_dir`) are dead, as above.
[[nodiscard]] std::vector<fs::path> dead_temps(const fs::path& entry_dir,
                                              const std::vector<std::string>& temp_names,
                                              LockHeld held, util::WallTime now);

// Removes the dead ones; each is reported, with the error if it stayed.
[[nodiscard]] std::vector<LeftoverTemp> remove_dead_temps(const fs::path& entry_dir,
                                                          const std::vector<std::string>& temp_names,
                                                          LockHeld held, util::WallTime now);

} // namespace npc::cache
