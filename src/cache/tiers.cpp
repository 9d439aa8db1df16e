#include <npc/cache/tiers.hpp>

#include <npc/storage/open.hpp>

namespace npc::cache {

Tiers::Tiers(const config::Settings& settings) : Tiers(settings.cache_root, settings.shared_cache_url) {}

Tiers::Tiers(fs::path root, std::optional<std::string> shared_url)
    : directory_(std::move(root)), url_(std::move(shared_url)) {}

std::vector<std::string> Tiers::worker_arguments() const {
  if (!url_) return {};
  return {"--shared-cache", *url_};
}

std::vector<std::shared_ptr<storage::Storage>> Tiers::connect(std::size_t count) const {
  if (!url_) return {};
  return storage::open(*url_, count, learned_);
}

const std::vector<std::shared_ptr<storage::Storage>>& Tiers::common_connections(std::size_t count) {
  if (url_ && connections_.empty()) connections_ = storage::open(*url_, count, learned_);
  return connections_;
}

const Cache& Tiers::common(std::size_t count) {
  if (!url_) return directory_;
  if (!common_) common_.emplace(common_connections(count));
  return *common_;
}

std::vector<const Cache*> Tiers::copies(std::size_t count) {
  std::vector<const Cache*> all{&common(count)};
  if (url_) all.push_back(&directory_);
  return all;
}

} // namespace npc::cache
