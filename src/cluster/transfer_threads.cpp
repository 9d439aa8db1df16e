#include <npc/cluster/transfer_threads.hpp>

#include <spdlog/spdlog.h>

#include <npc/util/signals.hpp>

namespace npc::cluster {

TransferThreads::TransferThreads(std::vector<std::shared_ptr<storage::Storage>> connections,
                                 const cache::Cache& mirror)
    : mirror_(mirror) {
  for (auto& connection : connections)
    threads_.push_back(
        util::thread_without_signals([this, connection = std::move(connection)] { serve(connection); }));
}

TransferThreads::~TransferThreads() {
  wait();
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void TransferThreads::add(Job job) {
  {
    std::lock_guard guard(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void TransferThreads::add_first(Job job) {
  {
    std::lock_guard guard(mutex_);
    // After the urgent ones already waiting: a launcher's takes go in the
    // order it picked, costliest first.
    jobs_.insert(jobs_.begin() + static_cast<std::ptrdiff_t>(urgent_waiting_), std::move(job));
    ++urgent_waiting_;
  }
  wake_.notify_one();
}

void TransferThreads::upload(const cache::CacheKey& key, storage::Lock lock,
                             std::optional<std::vector<std::string>> listed) {
  // A std::function must be copyable, and a lock is not: shared.
  auto held = std::make_shared<storage::Lock>(std::move(lock));
  add([key, held, listed = std::move(listed)](const cache::SharedTier& tier) {
    // Nothing done or failed in the mirror (the worker found the graph
    // locked here, or was killed): nothing to upload, the lock goes.
    if (auto pushed = tier.push_as_holder(key, *held, listed ? &*listed : nullptr); !pushed)
      spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", tier.describe(key),
                   pushed.error());
    if (auto released = held->release(); !released)
      spdlog::warn("cannot release the lock of {}: {} (it frees itself at its expiry)", tier.describe(key),
                   released.error());
  });
}

void TransferThreads::wait() {
  std::unique_lock guard(mutex_);
  settled_.wait(guard, [this] { return jobs_.empty() && running_ == 0; });
}

void TransferThreads::serve(const std::shared_ptr<storage::Storage>& connection) {
  const cache::SharedTier tier(connection, mirror_);
  for (;;) {
    Job job;
    {
      std::unique_lock guard(mutex_);
      wake_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return; // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
      if (urgent_waiting_ > 0) --urgent_waiting_;
      ++running_;
    }
    job(tier);
    // What the job held (a lock it did not hand on) goes before the wait
    // that counts it ended.
    job = nullptr;
    {
      std::lock_guard guard(mutex_);
      --running_;
    }
    settled_.notify_all();
  }
}

} // namespace npc::cluster
