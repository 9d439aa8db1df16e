#pragma once
// The launcher's own look at a remote cache entry (s3://, cache/remote.hpp)
// whose lock another node holds. The workers compile in the local mirror,
// where the remote lock does not show: without this look, every revisit of
// such a graph found its mirror entry pending and started a worker
// (neuron_cc_wrapper compile-entry) only to learn again that the lock was
// held, each start a process with its own LIST and GETs, about once a
// second per held graph. A graph held already when the launcher took it
// (remote_graphs.hpp saw the lock in force) is looked at this way from the
// start, with no worker at all. The look is one LIST of the entry's folder, and:
//
//   model.done there     the result fetched into the mirror (1 LIST and the
//                        GETs of cache::RemoteCache::fetch_result): done
//   model.log, no done   the cached failure copied likewise: failed (with
//                        --retry_failed_compilation it is not taken: the
//                        lock decides, as for a graph with no result)
//   the lock object      a GET of it: in force (unexpired, not of a dead
//                        process of this host) is held_elsewhere
//   otherwise            pending: a worker takes the lock and compiles
//
// A remote that cannot be read reads as pending: the worker then meets the
// same error and reports it as a failed attempt, with its log, rather than
// the launcher waiting on a remote it cannot see.

#include <filesystem>
#include <memory>

#include <npc/cache/remote.hpp>
#include <npc/cache/store.hpp>
#include <npc/launcher/pool_runner.hpp>
#include <npc/storage/storage.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// The look at an S3 cache's entry (pool_runner.hpp's HeldEntryLook), over
// one connection of the remote cache whose mirror is `mirror`. Not for
// several threads at once (one connection).
class StorageEntryLook final : public HeldEntryLook {
public:
  enum class RetryFailed { no, yes };
  StorageEntryLook(std::shared_ptr<storage::Storage> connection, const cache::Cache& mirror, RetryFailed retry)
      : remote_(std::move(connection), mirror), retry_(retry) {}
  [[nodiscard]] Pool::Found look(const fs::path& entry_dir) override;

private:
  cache::RemoteCache remote_;
  RetryFailed retry_;
};

} // namespace npc::launcher
