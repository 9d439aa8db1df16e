#pragma once
// A cache URL turned into storages: the one place that knows which backend
// a URL names. Today that is s3://bucket or s3://bucket/prefix (s3.hpp); a
// cache given as a path is a directory, whose storage the cache makes
// itself (cache/store.hpp).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <npc/storage/storage.hpp>

namespace npc::storage {

// Whether `text` names a cache by URL (scheme://...) rather than by path.
[[nodiscard]] bool is_url(std::string_view text);

// `count` storages of the one cache `url` names, a connection each (for as
// many threads), where it is and who we are looked up once (for S3, from the
// AWS environment: s3_config.hpp). Throws EnvironmentError naming the URL
// when it cannot be opened (no credentials, a bad endpoint, a scheme we do
// not know). What one of them learns of the server goes to `learned`, which
// every connection opened with it shares (a new one when none is given).
[[nodiscard]] std::vector<std::shared_ptr<Storage>> open(const std::string& url, std::size_t count = 1,
                                                         std::shared_ptr<Learned> learned = {});

} // namespace npc::storage
