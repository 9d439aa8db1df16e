// cluster/shared_entry_look: the launcher's hand in a shared tier, on a
// directory and on the run's S3 server. The takes of graphs' locks run on
// transfer threads beside the loop and say so through wake_fd; a graph
// another host holds is not taken; a taken graph is brought into the
// mirror, and its lock let go once its worker has ended.

#include <npc/cluster/shared_entry_look.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>

#include "two_tiers.hpp"

namespace npc::cluster {
namespace {

using namespace std::chrono_literals;
using Take = HeldEntryLook::Take;

class SharedEntryLookTest : public test::MirrorAndSharedTest {
protected:
  const std::vector<std::string> kFlags = {"-O1"};

  cache::CacheKey pending(const std::string& graph) {
    const cache::CacheKey key = cache::make_key_for_graph(graph, kFlags, "1.0");
    EXPECT_TRUE(origin->entry(key).store_graph(graph, kFlags).ok());
    return key;
  }
  std::shared_ptr<HeldEntryLook> make_look() {
    return make_shared_entry_look(shared_storage(), {shared_storage(), shared_storage()}, *mirror, false,
                                  cache::DownloadResult::no, std::nullopt);
  }
  // The takes begun, once all have ended: the loop's wait on wake_fd.
  static std::vector<HeldEntryLook::TakeEnded> ended_takes(HeldEntryLook& look, std::size_t begun) {
    std::vector<HeldEntryLook::TakeEnded> all;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (all.size() < begun && std::chrono::steady_clock::now() < until) {
      pollfd readable{look.wake_fd(), POLLIN, 0};
      EXPECT_GE(::poll(&readable, 1, 1000), 0);
      for (auto& t : look.takes_ended()) all.push_back(std::move(t));
    }
    return all;
  }
  std::string lock_key(const cache::CacheKey& key) const {
    return key.relative_path().generic_string() + "/" + std::string(cache::kFrameworkLockFile);
  }
};

INSTANTIATE_TEST_SUITE_P(DirectoryAndS3, SharedEntryLookTest,
                         ::testing::Values(test::SharedBackend::directory, test::SharedBackend::s3),
                         test::shared_backend_name);

TEST_P(SharedEntryLookTest, TakesRunBesideTheLoopAndAGraphHeldElsewhereIsNotTaken) {
  const cache::CacheKey free = pending("HloModule free\n");
  const cache::CacheKey held = pending("HloModule held\n");
  auto other_host = origin->entry(held).lock(0ms);
  ASSERT_TRUE(other_host && std::holds_alternative<storage::Lock>(*other_host));
  auto look = make_look();
  ASSERT_GE(look->wake_fd(), 0);
  look->begin_take(0, mirror->entry_dir(free));
  look->begin_take(1, mirror->entry_dir(held));
  auto ended = ended_takes(*look, 2);
  ASSERT_EQ(ended.size(), 2u);
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) { return a.item < b.item; });
  EXPECT_EQ(ended[0].take, Take::taken());
  EXPECT_EQ(ended[1].take, Take::as_found(cache::Found::held_elsewhere));
  EXPECT_TRUE(fs::exists(mirror->entry_dir(free) / cache::kGraphFile)) << "brought for its worker";
  EXPECT_TRUE(shared_storage()->stat(lock_key(free)).value_or(std::nullopt).has_value()) << "its lock is held";

  // The worker ended without a result: the lock goes, the graph stays pending.
  look->attempt_ended(mirror->entry_dir(free));
  look->finish();
  EXPECT_FALSE(shared_storage()->stat(lock_key(free)).value_or(std::nullopt).has_value());
  EXPECT_EQ(shared_names(free.relative_path()),
            (std::vector<std::string>{"compile_flags.json", std::string(cache::kGraphFile)}));
}

} // namespace
} // namespace npc::cluster
