#pragma once
// A compile for a remote cache (s3://, cache/remote.hpp): the entry is
// compiled in the local mirror, under the remote entry's lock
// (storage/lock.hpp) so that the nodes sharing the cache compile each
// graph once, and its result is pushed to the remote, model.done last.
//
// A process that finds the remote lock held waits, as for a local lock,
// looking every few seconds whether the holder's result has arrived; when it
// has, it is downloaded into the mirror instead of compiled again. A lock
// whose holder stopped renewing it (a node that died) is taken over once it
// expires.
//
// The result reaches the remote after it is in the mirror: when the upload
// fails the compile still counts (the caller has its NEFF), with a warning
// that the remote lacks it. Another node then compiles it again; this node's
// mirror serves its own hits without asking S3, and its next launcher run
// uploads the result (launcher/remote_graphs.hpp).

#include <memory>
#include <string>
#include <vector>

#include <npc/cache/remote.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/storage/storage.hpp>

namespace npc::compile {

// How often a waiter looks at a held remote lock.
inline constexpr auto kRemoteLockPoll = std::chrono::seconds(2);

// The remote's result for `key` into the mirror (see cache/remote.hpp), for
// a lookup before compiling: a rejected one is logged and reads as a miss;
// an unreachable remote throws EnvironmentError.
[[nodiscard]] cache::FetchOutcome fetch_remote_result(const cache::RemoteCache& remote, const cache::CacheKey& key,
                                                       std::chrono::milliseconds lock_wait);

// Compiles the mirror entry of `key` (its graph and flags already there)
// as above. Outcomes and errors as compile_entry's, plus already_done and
// cached_failure for a result another node published while we waited.
[[nodiscard]] EntryCompileResult compile_remote_entry(const cache::RemoteCache& remote, const cache::CacheKey& key,
                                                      const EntryCompileOptions& options);

} // namespace npc::compile
