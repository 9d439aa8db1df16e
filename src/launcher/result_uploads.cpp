#include <npc/launcher/result_uploads.hpp>

#include <csignal>
#include <pthread.h>

#include <spdlog/spdlog.h>

#include <npc/cache/shared_tier.hpp>

namespace npc::launcher {

ResultUploads::ResultUploads(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror)
    : mirror_(mirror) {
  // The launcher's event loop takes its signals from a signalfd: no thread
  // of ours may take one first.
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  for (auto& connection : connections)
    threads_.emplace_back([this, connection = std::move(connection)] { serve(connection); });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

ResultUploads::~ResultUploads() {
  wait();
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ResultUploads::add(const cache::CacheKey& key, storage::Lock lock) {
  {
    std::lock_guard guard(mutex_);
    jobs_.push_back({key, std::move(lock)});
  }
  wake_.notify_one();
}

void ResultUploads::wait() {
  std::unique_lock guard(mutex_);
  settled_.wait(guard, [this] { return jobs_.empty() && running_ == 0; });
}

void ResultUploads::serve(const std::shared_ptr<storage::Storage>& connection) {
  const cache::SharedTier shared(connection, mirror_);
  for (;;) {
    Job job;
    {
      std::unique_lock guard(mutex_);
      wake_.wait(guard, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return; // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    // Nothing done or failed in the mirror (the worker found the graph
    // locked here, or was killed): nothing to upload, the lock goes.
    if (auto pushed = shared.push(job.key); !pushed)
      spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", shared.describe(job.key),
                   pushed.error());
    if (auto released = job.lock.release(); !released)
      spdlog::warn("cannot release the lock of {}: {} (it frees itself at its expiry)", shared.describe(job.key),
                   released.error());
    {
      std::lock_guard guard(mutex_);
      --running_;
    }
    settled_.notify_all();
  }
}

} // namespace npc::launcher
