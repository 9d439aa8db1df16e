#include <npc/storage/open.hpp>

#include <npc/storage/s3.hpp>
#include <npc/util/error.hpp>

namespace npc::storage {

bool is_url(std::string_view text) { return text.find("://") != std::string_view::npos; }

std::vector<std::shared_ptr<Storage>> open(const std::string& url, std::size_t count, std::shared_ptr<Learned> learned) {
  if (!std::string_view(url).starts_with("s3://"))
    throw EnvironmentError("cannot use the cache " + url + ": only s3:// URLs name a cache by URL (give a directory's "
                                                          "path for a local cache)");
  auto opened = S3Storage::open_many(url, count, process_environment(), {}, std::move(learned));
  if (!opened) throw EnvironmentError("cannot use the cache " + url + ": " + opened.error());
  std::vector<std::shared_ptr<Storage>> storages;
  for (auto& one : *opened) storages.push_back(std::move(one));
  return storages;
}

} // namespace npc::storage
