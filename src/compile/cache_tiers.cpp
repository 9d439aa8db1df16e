#include <npc/compile/cache_tiers.hpp>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/compile/remote_entry.hpp>
#include <npc/storage/open.hpp>
#include <npc/util/error.hpp>

namespace npc::compile {

CacheTiers::CacheTiers(const cache::Cache& directory, std::optional<std::string> shared_url, Unusable unusable,
                       std::function<void()> before_open)
    : directory_(directory), url_(std::move(shared_url)), unusable_(unusable), before_open_(std::move(before_open)) {}

void CacheTiers::prepare() {
  if (before_open_ && url_ && !dropped_ && !shared_) before_open_();
}

bool CacheTiers::open() {
  if (!url_ || dropped_) return false;
  if (!shared_) shared_.emplace(storage::open(*url_).front(), directory_);
  return true;
}

void CacheTiers::unusable(const std::exception& e) {
  if (unusable_ == Unusable::fail) throw;
  spdlog::warn("the S3 cache {} cannot be used ({}); compiling without it, into {} only", *url_, e.what(),
               directory_.describe());
  shared_.reset();
  dropped_ = true;
}

std::optional<std::string> CacheTiers::store_shared_graph(const cache::CacheKey& key, std::string_view graph,
                                                          const std::vector<std::string>& flags) {
  prepare();
  if (!open()) return std::nullopt;
  if (auto s = shared_->store_graph(key, graph, flags); !s) throw EnvironmentError(s.error());
  return shared_->describe(key) + "/" + std::string(cache::kGraphFile);
}

bool CacheTiers::fetch(const cache::CacheKey& key, std::chrono::milliseconds lock_wait) {
  prepare(); // outside the try: a program that cannot go on is no store failing
  try {
    if (!open()) return false;
    auto outcome = fetch_remote_result(*shared_, key, lock_wait);
    return outcome == cache::FetchOutcome::copied || outcome == cache::FetchOutcome::already_done;
  } catch (const EnvironmentError& e) {
    unusable(e);
    return false;
  }
}

EntryCompileResult CacheTiers::compile(const cache::CacheKey& key, const fs::path& entry_dir,
                                       const EntryCompileOptions& options) {
  prepare();
  try {
    if (open()) return compile_remote_entry(*shared_, key, options);
  } catch (const EnvironmentError& e) {
    unusable(e);
  }
  return compile_entry(directory_, entry_dir, options);
}

} // namespace npc::compile
