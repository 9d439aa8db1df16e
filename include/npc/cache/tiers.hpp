#pragma once
// What a cache is made of, as the settings name it (config/settings.hpp):
// this machine's directory and, for a cache named by URL
// (NEURON_COMPILE_CACHE_URL=s3://...), the shared store behind it, of which
// the directory is the mirror (shared_tier.hpp). Every program gets its
// cache here. This is the one place that knows where the shared store is and
// opens connections to it; above cache/ a program only asks whether there is
// one, for what it does differently then (a worker told where the store is,
// a graph named by URL taken).
//
// Nothing is opened before it is asked for: a hit in the directory makes no
// client, reads no credential and asks no instance metadata service.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/store.hpp>
#include <npc/config/settings.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

class Tiers {
public:
  // The directory settings.cache_root and the store settings.shared_cache_url.
  explicit Tiers(const config::Settings& settings);
  // The directory `root` and, when given, the shared store at `shared_url`.
  Tiers(fs::path root, std::optional<std::string> shared_url);
  // The caches it hands out refer into it.
  Tiers(const Tiers&) = delete;
  Tiers& operator=(const Tiers&) = delete;

  // This machine's directory: the whole cache, or the shared store's mirror.
  [[nodiscard]] Cache& directory() { return directory_; }
  [[nodiscard]] const Cache& directory() const { return directory_; }

  // Whether a shared store stands behind the directory.
  [[nodiscard]] bool shared() const { return url_.has_value(); }
  // The shared store as users name it (its URL), for messages and for the
  // worker processes told to open the same store; nullopt when there is none.
  [[nodiscard]] const std::optional<std::string>& shared_url() const { return url_; }
  // What a worker process (neuron_cc_wrapper compile-entry, run on an entry
  // of the directory) is told so that it opens this same cache: the shared
  // store's URL when there is one (--shared-cache), else nothing.
  [[nodiscard]] std::vector<std::string> worker_arguments() const;

  // `count` new connections to the shared store; none when there is none.
  // What one connection it opened learns of the server, all of them know.
  [[nodiscard]] std::vector<std::shared_ptr<storage::Storage>> connect(std::size_t count = 1) const;

  // The cache every host sees: the shared store's objects, over `count`
  // connections opened on the first call; the directory when there is none.
  [[nodiscard]] const Cache& common(std::size_t count);
  // The connections common() works over, `count` of them opened by the
  // first call of either (none for a directory cache): bundles spread their
  // transfers over them.
  [[nodiscard]] const std::vector<std::shared_ptr<storage::Storage>>& common_connections(std::size_t count);
  // Every copy a clean-up reaches, the common one first: the shared store,
  // then this machine's mirror; or the directory alone.
  [[nodiscard]] std::vector<const Cache*> copies(std::size_t count);

private:
  Cache directory_;
  std::optional<std::string> url_;
  std::vector<std::shared_ptr<storage::Storage>> connections_;
  std::optional<Cache> common_;
  std::shared_ptr<storage::Learned> learned_ = std::make_shared<storage::Learned>();
};

} // namespace npc::cache
