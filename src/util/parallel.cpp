#include <npc/util/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace npc::util {

std::size_t parallel_threads() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
}

void parallel_ranges(std::size_t count, std::size_t min_per_thread,
                     const std::function<void(std::size_t begin, std::size_t end)>& work) {
  std::size_t by_size = (count + std::max<std::size_t>(min_per_thread, 1) - 1) / std::max<std::size_t>(min_per_thread, 1);
  std::size_t threads = std::min(parallel_threads(), by_size);
  if (threads <= 1) {
    if (count > 0) work(0, count);
    return;
  }
  std::size_t step = (count + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t begin = step; begin < count; begin += step)
    pool.emplace_back(work, begin, std::min(begin + step, count));
  work(0, std::min(step, count)); // the first range on this thread
  for (auto& t : pool) t.join();
}

void for_each_shared_out(std::size_t count, std::size_t workers,
                         const std::function<void(std::size_t worker, std::size_t i)>& work) {
  std::atomic<std::size_t> next = 0;
  std::atomic<bool> failed = false;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run = [&](std::size_t worker) {
    for (std::size_t i = next++; i < count && !failed; i = next++) {
      try {
        work(worker, i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!failed.exchange(true)) first_error = std::current_exception();
      }
    }
  };
  const std::size_t threads = std::max<std::size_t>(1, std::min(workers, count));
  std::vector<std::thread> helpers;
  for (std::size_t w = 1; w < threads; ++w) helpers.emplace_back(run, w);
  run(0);
  for (auto& helper : helpers) helper.join();
  if (first_error) std::rethrow_exception(first_error);
}

} // namespace npc::util
