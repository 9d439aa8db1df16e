// util/parallel: ranges cover every index exactly once, on one thread when
// the work is small.

#include <algorithm>
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

// Enough work for every thread allowed: one range per thread, each on a
// thread of its own (the first on the caller's), the ranges contiguous and
// even. On a machine with more than one core this is more than one thread.
TEST(ParallelRanges, LargeWorkRunsOnEveryAllowedThread) {
  // 840 is divisible by every thread count from 1 to 8: the ranges are even.
  constexpr std::size_t kCount = 840, kMinPerThread = 10;
  const std::size_t threads = parallel_threads();
  std::mutex m;
  std::set<std::thread::id> ids;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  parallel_ranges(kCount, kMinPerThread, [&](std::size_t begin, std::size_t end) {
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
    ranges.emplace_back(begin, end);
  });
  EXPECT_EQ(ranges.size(), threads);
  EXPECT_EQ(ids.size(), threads) << "ranges shared a thread";
  EXPECT_TRUE(ids.contains(std::this_thread::get_id())) << "the caller did no range itself";
  std::sort(ranges.begin(), ranges.end());
  std::size_t next = 0;
  for (const auto& [begin, end] : ranges) {
    EXPECT_EQ(begin, next);
    EXPECT_EQ(end - begin, kCount / threads);
    next = end;
  }
  EXPECT_EQ(next, kCount);
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(ids.size(), 1u);
  }
}

} // namespace
} // namespace npc::util
