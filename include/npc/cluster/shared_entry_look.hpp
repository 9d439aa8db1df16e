#pragma once
// The launcher's hand in a shared tier (an s3:// cache) while its pool runs
// (cluster.hpp's HeldEntryLook): its looks over one connection, used
// by the event loop's thread alone, its locks and transfers over others.
//
// Looks. Many graphs due a look at once are judged from one walk of their
// version folder when that costs less than a LIST each, a page counted as
// kEntryListsPerWalkPage LISTs (`version_objects`, the folder's size when
// the graphs were taken, grown threefold as results land; unknown: one
// LIST each). At a pick the launcher
// looks at graph after graph, most of them done or held by other hosts,
// until one is free: a walk at most kWalkReuse old answers for all of them,
// while the folder takes at most kMaxPickWalkPages LISTs. A lock object seen
// again unchanged is judged from what was read of it, and one written since
// the launcher started and less than kPresumeHeldFor ago is presumed held
// (cache::LockMemo): looks at a graph held for minutes cost the listing, and
// a read per renewal of its lock.
//
// Locks and transfers. The launcher takes a graph's lock just before its
// worker starts and brings the graph into the mirror, so the worker
// compiles there as in a directory, with no S3 client of its own (a
// process that loads libcurl and opens connections cost about a second of
// a busy machine per compile). Once the worker has ended, the result is
// uploaded and the lock released. Both run on transfer threads
// (transfer_threads.hpp), a connection each, beside the event loop
// (begin_take, takes_ended): the slots free at once take their locks
// together, and a take comes before any upload waiting. Once per run the
// launcher finds out whether the server honours create-only PUTs, and then
// a lock is one PUT. A graph a walk showed free and another host took
// meanwhile costs that PUT alone the first time; found free again later,
// its lock is judged and broken when stale (storage::Lock::try_acquire).

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <npc/cache/shared_tier.hpp>
#include <npc/cluster/cluster.hpp>

namespace npc::cluster {

// How old a walk of the version folder may be and still answer looks: a
// graph it shows free may have been taken since (the lock taken next says
// so), but none it shows held or done can have become free to compile.
inline constexpr auto kWalkReuse = std::chrono::milliseconds(500);
// The looks again at graphs held elsewhere (look_all) reuse a walk only
// within about one tick: a launcher out of work looks every
// kOutOfWorkMinPollSeconds (pool.hpp), and a walk older than that would
// show it what it saw last time.
inline constexpr auto kRevisitWalkReuse = std::chrono::milliseconds(150);
// A page of a walk (1,000 objects, about 290 KB of XML) costs the server
// about as much as this many LISTs of one entry (RADOS Gateway: about 22 ms
// of its time against 5.7 ms) and takes longer to bring: looks again at
// fewer graphs than this many per page list each of them. Late in a run,
// 15 launchers out of work, each looking every 0.2 s at the few graphs held
// elsewhere, would otherwise walk the folder 75 times a second.
inline constexpr std::size_t kEntryListsPerWalkPage = 4;
// A walk answers the looks at a pick while it takes at most this many LISTs
// (about 2,000 entries); in a larger cache each graph looked at is listed.
inline constexpr std::size_t kMaxPickWalkPages = 4;

// Takes of locks and uploads of results (transfer_threads.hpp) go over
// `transfer_connections`, one thread each.
[[nodiscard]] std::shared_ptr<HeldEntryLook>
make_shared_entry_look(std::shared_ptr<storage::Storage> connection,
                       std::vector<std::shared_ptr<storage::Storage>> transfer_connections, const cache::Cache& mirror,
                       bool retry_failed, cache::DownloadResult download, std::optional<std::size_t> version_objects,
                       std::map<std::string, std::string> flags_by_hash = {});

// Transfer threads, each over a connection of its own: as many as a
// launcher's usual slots (the takes at its start run together), and the
// uploads of a NEFF each at most.
inline constexpr std::size_t kTransferConnections = 8;

} // namespace npc::cluster
