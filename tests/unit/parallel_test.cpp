// util/parallel: ranges cover every index exactly once, on one thread when
// the work is small.

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <npc/util/parallel.hpp>

namespace npc::util {
namespace {

TEST(ParallelRanges, EveryIndexExactlyOnce) {
  for (std::size_t count : {0UL, 1UL, 7UL, 100UL, 1000UL, 4097UL}) {
    std::vector<std::atomic<int>> seen(count);
    std::atomic<std::size_t> calls{0};
    parallel_ranges(count, 10, [&](std::size_t begin, std::size_t end) {
      ASSERT_LT(begin, end);
      ++calls;
      for (std::size_t i = begin; i < end; ++i) ++seen[i];
    });
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(seen[i].load(), 1) << "index " << i << " of " << count;
    EXPECT_LE(calls.load(), parallel_threads());
    if (count == 0) {
      EXPECT_EQ(calls.load(), 0U);
    }
  }
}

TEST(ParallelRanges, SmallWorkStaysOnTheCallingThread) {
  std::set<std::thread::id> threads;
  std::mutex m;
  parallel_ranges(50, 100, [&](std::size_t, std::size_t) {
    std::lock_guard<std::mutex> lock(m);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ParallelRanges, ThreadsAreBetweenOneAndEight) {
  EXPECT_GE(parallel_threads(), 1U);
  EXPECT_LE(parallel_threads(), 8U);
}

} // namespace
} // namespace npc::util
