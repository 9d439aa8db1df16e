#pragma once
// Splitting independent, kernel-bound work (a stat per file, an unlink per
// file) over a few threads. A large cache has 100,000 entries; each thread
// takes one contiguous range, so callers write results by index without
// locks.

#include <cstddef>
#include <functional>

namespace npc::util {

// Calls work(begin, end) on ranges that cover [0, count) exactly once, on up
// to one thread per core (at most 8), each with at least min_per_thread
// items; on the calling thread alone when that makes one range. Returns when
// every range is done.
void parallel_ranges(std::size_t count, std::size_t min_per_thread,
                     const std::function<void(std::size_t begin, std::size_t end)>& work);

// Calls work(worker, i) for each i in [0, count) on `workers` threads (the
// calling thread is worker 0), handing out items one at a time, so slow
// items (network requests) do not hold up a whole range. A worker number is
// always the same thread: it may own a resource, such as a connection. The
// first exception stops the items not yet started and is rethrown once all
// threads have ended.
void for_each_shared_out(std::size_t count, std::size_t workers,
                         const std::function<void(std::size_t worker, std::size_t i)>& work);

// The threads parallel_ranges uses at most on this machine.
[[nodiscard]] std::size_t parallel_threads();

} // namespace npc::util
