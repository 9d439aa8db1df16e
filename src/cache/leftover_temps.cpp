#include <npc/cache/leftover_temps.hpp>

#include <npc/util/fs.hpp>

namespace npc::cache {

static_assert(kCompileWorkPrefix.starts_with(util::kTempPrefix) &&
              kCompileNeffPrefix.starts_with(util::kTempPrefix));

namespace {

bool made_only_under_the_lock(std::string_view name) {
  return name.starts_with(kCompileWorkPrefix) || name.starts_with(kCompileNeffPrefix);
}

} // namespace

std::vector<fs::path> dead_temps(const fs::path& entry_dir, const std::vector<std::string>& temp_names,
                                 LockHeld held, util::WallTime now) {
  std::vector<fs::path> dead;
  for (const auto& name : temp_names) {
    fs::path path = entry_dir / name;
    if (held == LockHeld::yes && made_only_under_the_lock(name)) {
      dead.push_back(std::move(path));
      continue;
    }
    // Gone meanwhile (its writer finished): nothing to judge.
    auto when = util::mtime(path);
    if (when && now - *when >= kStaleTempAge) dead.push_back(std::move(path));
  }
  return dead;
}

std::vector<LeftoverTemp> remove_dead_temps(const fs::path& entry_dir, const std::vector<std::string>& temp_names,
                                            LockHeld held, util::WallTime now) {
  std::vector<LeftoverTemp> removed;
  for (auto& path : dead_temps(entry_dir, temp_names, held, now)) {
    auto s = util::remove_tree(path);
    removed.push_back({std::move(path), s ? std::string() : s.error()});
  }
  return removed;
}

} // namespace npc::cache
