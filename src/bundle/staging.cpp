#include <npc/bundle/staging.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <npc/cache/store.hpp>

namespace npc::bundle {

namespace {

// Held by a running import inside its staging folder.
constexpr std::string_view kImportLockName = "npc-import.lock";
// A staging folder younger than this is never taken for a dead import's: an
// import creates and locks its folder within moments.
constexpr auto kStaleStagingAge = std::chrono::minutes(10);

util::LockHolder this_import() { return util::LockHolder::self(cache::lock_tool_name()); }

} // namespace

ImportStaging::ImportStaging(const cache::Cache& cache) : dir_(cache.private_dir(), kImportStagingPrefix) {}

Status ImportStaging::lock() {
  auto taken = util::FileLock::try_acquire(dir_.path() / kImportLockName, this_import());
  if (!taken || !taken->has_value()) return fail("cannot lock the staging folder " + dir_.path().string());
  lock_ = std::move(**taken);
  return ok_status();
}

void remove_stale_import_staging(const cache::Cache& cache) {
  fs::path dir = cache.private_dir();
  auto now = std::chrono::system_clock::now();
  for (const auto& name : util::list_names(dir).value_or(std::vector<std::string>{})) {
    if (!std::string_view(name).starts_with(kImportStagingPrefix)) continue;
    fs::path staging = dir / name;
    // A folder whose lock was taken once and is free now was left by an
    // import that died (the kernel frees the lock of a killed holder): gone
    // at once. One without a lock yet may be an import's that is about to
    // take it: gone only once old. Taken once means its holder's record is
    // in it: an empty lock file is one an import has created and not yet
    // locked (taking it then would remove a running import's folder).
    std::error_code ec;
    bool locked_once = fs::file_size(staging / kImportLockName, ec) > 0 && !ec;
    auto when = util::mtime(staging);
    if (!locked_once && (!when || now - *when < kStaleStagingAge)) continue;
    auto lock = util::FileLock::try_acquire(staging / kImportLockName, this_import());
    if (!lock || !lock->has_value()) continue; // a running import holds it
    if (auto s = util::remove_tree(staging); !s) spdlog::debug("{}", s.error());
  }
}

} // namespace npc::bundle
