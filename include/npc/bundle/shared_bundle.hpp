#pragma once
// Bundles of a cache's shared tier (cache/shared_tier.hpp; an S3 cache,
// s3://bucket/prefix): they go through this host's mirror, so every check of
// a local export and import holds unchanged.
//
//   export  chooses entries from the shared tier's own listing (every host's
//           results; "used since" by their npc-last-use), brings each one's
//           result into the mirror (downloaded and checked against its
//           integrity record, as a hit is; one the mirror holds already is
//           not downloaded again), then writes the bundle from the mirror.
//           An export is not a use: no npc-last-use is written.
//   import  verifies the bundle into the mirror, as a local import does,
//           then uploads each entry to the shared tier under its lock there,
//           model.done last (SharedTier::push). An entry the shared tier
//           has a result for already keeps it, as a local import keeps an
//           entry done here; one whose lock another host holds is skipped
//           (its compile will publish it).
//
// Both leave the entries in the mirror, where this host's hits find them.
// A shared tier that cannot be reached or denies throws EnvironmentError.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <vector>

#include <npc/bundle/bundle.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {
class Cache;
class Tiers;
}

namespace npc::bundle {

namespace fs = std::filesystem;

// `connections`: storages of the one shared tier (at least one), a thread each
// for the downloads and uploads; `mirror`: this node's mirror of it.
[[nodiscard]] ExportReport export_shared_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                                const cache::Cache& mirror, const ExportSelection& selection,
                                                const fs::path& output, const ExportOptions& options);

[[nodiscard]] ImportReport import_shared_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                                const cache::Cache& mirror, const fs::path& bundle,
                                                const ImportOptions& options);

// A bundle of the cache `tiers` make (cache/tiers.hpp): of its shared tier as
// above, over the tiers' common connections, when there is one; else of its
// directory (bundle.hpp).
[[nodiscard]] ExportReport export_cache_bundle(cache::Tiers& tiers, std::size_t connections,
                                               const ExportSelection& selection, const fs::path& output,
                                               const ExportOptions& options);
[[nodiscard]] ImportReport import_cache_bundle(cache::Tiers& tiers, std::size_t connections, const fs::path& bundle,
                                               const ImportOptions& options);

} // namespace npc::bundle
