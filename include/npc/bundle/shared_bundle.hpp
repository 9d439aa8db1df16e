#pragma once
// Bundles of a remote cache (s3://bucket/prefix, cache/remote.hpp): they go
// through this node's mirror, so every check of a local export and import
// holds unchanged.
//
//   export  chooses entries from the remote's own listing (every node's
//           results; "used since" by their npc-last-use), brings each one's
//           result into the mirror (downloaded and checked against its
//           integrity record, as a hit is; one the mirror holds already is
//           not downloaded again), then writes the bundle from the mirror.
//           An export is not a use: no npc-last-use is written.
//   import  verifies the bundle into the mirror, as a local import does,
//           then uploads each entry to the remote under the entry's lock in
//           the remote, model.done last (RemoteCache::push). An entry the
//           remote has a result for already keeps it, as a local import
//           keeps an entry done here; one whose lock another node holds is
//           skipped (its compile will publish it).
//
// Both leave the entries in the mirror, where this node's hits find them.
// An unreachable or denying remote throws EnvironmentError.

#include <filesystem>
#include <memory>
#include <vector>

#include <npc/bundle/bundle.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {
class Cache;
}

namespace npc::bundle {

namespace fs = std::filesystem;

// `connections`: storages of the one remote (at least one), a thread each
// for the downloads and uploads; `mirror`: this node's mirror of it.
[[nodiscard]] ExportReport export_remote_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                                const cache::Cache& mirror, const ExportSelection& selection,
                                                const fs::path& output, const ExportOptions& options);

[[nodiscard]] ImportReport import_remote_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                                const cache::Cache& mirror, const fs::path& bundle,
                                                const ImportOptions& options);

} // namespace npc::bundle
