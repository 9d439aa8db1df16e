#include <npc/cache/secondary.hpp>

#include <spdlog/spdlog.h>

#include <npc/config/neuron_cc_flags.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

std::optional<fs::path> resolve_secondary_root(std::string_view value) {
  if (util::trim(value).empty()) return std::nullopt;
  std::error_code ec;
  fs::path root = fs::absolute(fs::path(std::string(value)), ec).lexically_normal();
  if (ec) root = fs::path(std::string(value));
  if (fs::is_directory(root / config::kCacheDirName, ec)) root /= config::kCacheDirName;
  return root;
}

std::optional<fs::path> secondary_root_from_environment() {
  auto value = util::env(kSecondaryCacheEnv);
  if (!value) return std::nullopt;
  return resolve_secondary_root(*value);
}

FetchResult fetch_from_secondary(const Cache& local, const fs::path& secondary_root, const CacheKey& key,
                                 std::chrono::milliseconds lock_wait) {
  // The cheap look first: most misses end here, with nothing created locally.
  if (!Entry::looks_done_at(secondary_root / key.relative_path())) return {};
  std::error_code ec;
  if (fs::equivalent(secondary_root, local.root(), ec)) return {};
  // Only read: its trash folder is never used.
  const storage::LocalStorage secondary(secondary_root, secondary_root);
  auto got = fetch_result(secondary, local, key, {.lock_wait = lock_wait, .failures = false});
  if (!got) return {FetchOutcome::rejected, got.error(), false};
  return *got;
}

bool bring_from_secondary(const Cache& local, const std::optional<fs::path>& root, const CacheKey& key,
                          std::chrono::milliseconds lock_wait) {
  if (!root) return false;
  std::error_code ec;
  if (!fs::is_directory(*root, ec)) {
    spdlog::warn("the secondary cache {} is not a directory; not used", root->string());
    return false;
  }
  auto result = fetch_from_secondary(local, *root, key, lock_wait);
  switch (result.outcome) {
  case FetchOutcome::copied:
    spdlog::info("copied {} from the secondary cache {}", key.str(), root->string());
    return true;
  case FetchOutcome::already_done: return true;
  case FetchOutcome::rejected:
    spdlog::warn("not using {} from the secondary cache {}: {}", key.str(), root->string(), result.detail);
    return false;
  case FetchOutcome::miss:
  case FetchOutcome::failure_copied: // not asked for
  case FetchOutcome::busy: return false;
  }
  return false;
}

} // namespace npc::cache
