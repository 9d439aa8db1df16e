#pragma once
// The requests a launcher makes to a shared tier beside its event loop, on
// threads of their own, a connection each (shared_entry_look.hpp): taking
// a graph's lock and bringing its graph before its worker starts, and
// uploading the result and releasing the lock after it ends. The event
// loop never waits on one: a slot's next compile starts while the last
// result (a NEFF can be hundreds of MiB) still uploads, and the slots
// free at once (at a launcher's start, all of them) take their locks
// together instead of one after another. A lock taken is renewed until
// released, so a job may take as long as it needs.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <npc/cache/key.hpp>
#include <npc/cache/shared_tier.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cluster {

class TransferThreads {
public:
  // What a thread runs, over its own connection to the shared tier.
  using Job = std::function<void(const cache::SharedTier& tier)>;

  // One thread per connection; `mirror` must outlive this.
  TransferThreads(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror);
  ~TransferThreads(); // waits for every job added
  TransferThreads(const TransferThreads&) = delete;
  TransferThreads& operator=(const TransferThreads&) = delete;

  // Runs `job` after those already waiting.
  void add(Job job);
  // Runs `job` before those added with add() that wait, after those added
  // with add_first() that wait: what a free slot waits on comes before an
  // upload, which only holds a lock a little longer, and the slots' takes
  // go in the order they were picked.
  void add_first(Job job);
  // Uploads the mirror's result of `key` if it has one (done, or a failure
  // with its log), then releases `lock`. A failed upload is a warning: the
  // result stays in the mirror, and the entry pending in the shared tier.
  // `listed`: the entry's files as listed once `lock` was taken (nothing
  // else writes the entry under it), which spares the upload its listing.
  void upload(const cache::CacheKey& key, storage::Lock lock,
              std::optional<std::vector<std::string>> listed = std::nullopt);
  // Returns once every job added so far has ended.
  void wait();

private:
  void serve(const std::shared_ptr<storage::Storage>& connection);

  const cache::Cache& mirror_;
  std::mutex mutex_;
  std::condition_variable wake_;    // a job added, or stopping
  std::condition_variable settled_; // a job ended
  std::deque<Job> jobs_;
  std::size_t urgent_waiting_ = 0; // the first of jobs_, added with add_first()
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace npc::cluster
