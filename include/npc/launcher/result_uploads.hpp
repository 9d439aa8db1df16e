#pragma once
// The uploads of results a launcher's workers compiled into the mirror of a
// shared tier, each under the entry's lock the launcher took for the worker
// (shared_entry_look.hpp): the result goes up (cache::SharedTier::push),
// then the lock is released. They run on threads of their own, a connection
// each, so a worker's slot takes its next compile while the last result
// (a NEFF can be hundreds of MiB) is still uploading, and the launcher's
// event loop never waits on one. The lock is renewed until released, so an
// upload may take as long as it needs.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>

namespace npc::launcher {

class ResultUploads {
public:
  // One thread per connection; `mirror` must outlive this.
  ResultUploads(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror);
  ~ResultUploads(); // waits for every upload added
  ResultUploads(const ResultUploads&) = delete;
  ResultUploads& operator=(const ResultUploads&) = delete;

  // Uploads the mirror's result of `key` if it has one (done, or a failure
  // with its log), then releases `lock`. A failed upload is a warning: the
  // result stays in the mirror, and the entry pending in the shared tier.
  void add(const cache::CacheKey& key, storage::Lock lock);
  // Returns once every upload added so far has ended.
  void wait();

private:
  struct Job {
    cache::CacheKey key;
    storage::Lock lock;
  };
  void serve(const std::shared_ptr<storage::Storage>& connection);

  const cache::Cache& mirror_;
  std::mutex mutex_;
  std::condition_variable wake_;    // a job added, or stopping
  std::condition_variable settled_; // a job ended
  std::deque<Job> jobs_;
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace npc::launcher
