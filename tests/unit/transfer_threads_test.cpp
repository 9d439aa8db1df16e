// cluster/transfer_threads: jobs over a connection each, the urgent ones
// first; the results a launcher's workers compiled into the mirror go up to
// the shared tier, each entry's lock released after its upload (on a
// directory and on the run's S3 server).

#include <npc/cluster/transfer_threads.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/shared_tier.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>

#include "two_tiers.hpp"

namespace npc::cluster {
namespace {

class TransferThreadsTest : public test::MirrorAndSharedTest {};

INSTANTIATE_TEST_SUITE_P(DirectoryAndS3, TransferThreadsTest,
                         ::testing::Values(test::SharedBackend::directory, test::SharedBackend::s3),
                         test::shared_backend_name);

// Six graphs under the launcher's locks: four compiled, one failed, one the
// worker never compiled (it found the graph locked in the mirror). After
// wait(): the results are there, the failure's log too, nothing for the
// sixth, and no lock is left.
TEST_P(TransferThreadsTest, EachResultGoesUpThenItsLockIsReleased) {
  const std::vector<std::string> flags = {"-O1"};
  const cache::SharedTier shared(shared_storage(), *mirror);
  std::vector<cache::CacheKey> keys;
  TransferThreads uploads({shared_storage(), shared_storage()}, *mirror);
  for (int i = 0; i < 6; ++i) {
    const std::string graph = "HloModule upload_" + std::to_string(i) + "\n";
    keys.push_back(cache::make_key_for_graph(graph, flags, "1.0"));
    const cache::CacheKey& key = keys.back();
    // The trial's part: the graph pending in the shared tier.
    ASSERT_TRUE(shared.store_graph(key, graph, flags).ok());
    // The launcher's: the lock, and the graph in the mirror.
    auto got = shared.try_lock(key);
    ASSERT_TRUE(got) << got.error();
    ASSERT_TRUE(std::holds_alternative<storage::Lock>(*got));
    auto brought = shared.fetch_graph(key);
    ASSERT_TRUE(brought && *brought);
    // The worker's.
    if (i < 5) publish_result(mirror->entry(key), i < 4, i < 4 ? "neff-" + std::to_string(i) : "error: no\n");
    uploads.upload(key, std::move(std::get<storage::Lock>(*got)));
  }
  uploads.wait();
  const std::vector<std::string> done = {"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                         "npc-entry.json"};
  const std::vector<std::string> failed = {"compile_flags.json", "model.hlo_module.pb", "model.log", "npc-entry.json"};
  const std::vector<std::string> pending = {"compile_flags.json", "model.hlo_module.pb"};
  for (int i = 0; i < 6; ++i) {
    const std::filesystem::path folder = keys[static_cast<std::size_t>(i)].relative_path();
    EXPECT_EQ(shared_names(folder), i < 4 ? done : i == 4 ? failed : pending) << "graph " << i;
    if (i >= 4) continue;
    EXPECT_EQ(shared_text(folder / cache::kNeffFile), "neff-" + std::to_string(i));
  }
}

// A host cut off from the store for longer than its lock's lease must not go
// on as if it still held the lock: another host may have taken it over and
// published its own result meanwhile. Its upload then leaves that first
// result standing and the successor's lock in place. A lapsed lock that
// nobody took is renewed, and its result goes up as usual.
TEST_P(TransferThreadsTest, AResultWhoseLockLapsedLeavesTheFirstResultStanding) {
  using namespace std::chrono_literals;
  const std::vector<std::string> flags = {"-O1"};
  const cache::SharedTier shared(shared_storage(), *mirror);
  cache::Cache successor_mirror(dir() / "successor-mirror");
  ASSERT_TRUE(successor_mirror.ensure_root().ok());
  const cache::SharedTier successor(shared_storage(), successor_mirror);
  auto host = [](const std::string& name) {
    util::LockHolder holder;
    holder.pid = 4242;
    holder.host = name;
    holder.boot_id = "0b0b0b0b-0000-0000-0000-000000000000";
    holder.start_unix = 1;
    holder.tool = "neuron_parallel_compile";
    return holder;
  };
  auto lock_key = [](const cache::CacheKey& key) {
    return (key.relative_path() / cache::kFrameworkLockFile).generic_string();
  };
  std::vector<cache::CacheKey> keys;
  std::vector<storage::Lock> locks;
  for (int i = 0; i < 2; ++i) {
    const std::string graph = "HloModule lapsed_" + std::to_string(i) + "\n";
    keys.push_back(cache::make_key_for_graph(graph, flags, "1.0"));
    ASSERT_TRUE(shared.store_graph(keys.back(), graph, flags).ok());
    // Taken with a lease of 1 s, never renewed: the store out of reach.
    auto got = storage::Lock::try_acquire(shared_storage(), lock_key(keys.back()), host("cut-off"),
                                          {1s, std::chrono::hours(6)}, std::chrono::system_clock::now());
    ASSERT_TRUE(got && std::holds_alternative<storage::Lock>(*got)) << (got ? "held" : got.error());
    locks.push_back(std::move(std::get<storage::Lock>(*got)));
    ASSERT_TRUE(shared.fetch_graph(keys.back()).value());
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!(locks[0].lease_lapsed(std::chrono::system_clock::now()) &&
           locks[1].lease_lapsed(std::chrono::system_clock::now())) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(locks[0].lease_lapsed(std::chrono::system_clock::now()));
  ASSERT_TRUE(locks[1].lease_lapsed(std::chrono::system_clock::now()));
  // Another host takes the first graph's lock over and publishes its result.
  auto taken_over = storage::Lock::try_acquire(shared_storage(), lock_key(keys[0]), host("successor"),
                                               {60s, std::chrono::hours(6)}, std::chrono::system_clock::now());
  ASSERT_TRUE(taken_over && std::holds_alternative<storage::Lock>(*taken_over));
  ASSERT_TRUE(successor.fetch_graph(keys[0]).value());
  publish_result(successor_mirror.entry(keys[0]), true, "neff-of-the-successor");
  ASSERT_TRUE(successor.push(keys[0]).ok());
  const std::string successors_lock = shared_text(lock_key(keys[0]));

  // The cut-off host's compiles end; its uploads go by the takes' listings.
  const std::vector<std::string> listed = {"compile_flags.json", "model.hlo_module.pb"};
  {
    TransferThreads uploads({shared_storage()}, *mirror);
    for (int i = 0; i < 2; ++i) {
      publish_result(mirror->entry(keys[static_cast<std::size_t>(i)]), true, "neff-cut-off-" + std::to_string(i));
      uploads.upload(keys[static_cast<std::size_t>(i)], std::move(locks[static_cast<std::size_t>(i)]), listed);
    }
  }
  const std::vector<std::string> done = {"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                         "npc-entry.json"};
  std::vector<std::string> done_and_held = done;
  done_and_held.insert(done_and_held.begin() + 3, std::string(cache::kFrameworkLockFile));
  EXPECT_EQ(shared_names(keys[0].relative_path()), done_and_held);
  EXPECT_EQ(shared_text(keys[0].relative_path() / cache::kNeffFile), "neff-of-the-successor");
  EXPECT_EQ(shared_text(lock_key(keys[0])), successors_lock) << "the successor's lock stays";
  EXPECT_EQ(shared_names(keys[1].relative_path()), done);
  EXPECT_EQ(shared_text(keys[1].relative_path() / cache::kNeffFile), "neff-cut-off-1");
}

// The destructor waits too: nothing added is dropped.
TEST_P(TransferThreadsTest, TheDestructorWaitsForTheUploads) {
  const std::vector<std::string> flags = {"-O1"};
  const cache::SharedTier shared(shared_storage(), *mirror);
  const std::string graph = "HloModule upload_last\n";
  const cache::CacheKey key = cache::make_key_for_graph(graph, flags, "1.0");
  ASSERT_TRUE(shared.store_graph(key, graph, flags).ok());
  auto got = shared.try_lock(key);
  ASSERT_TRUE(got && std::holds_alternative<storage::Lock>(*got));
  ASSERT_TRUE(shared.fetch_graph(key).value());
  publish_result(mirror->entry(key), true, "neff-last");
  {
    TransferThreads uploads({shared_storage()}, *mirror);
    uploads.upload(key, std::move(std::get<storage::Lock>(*got)));
  }
  EXPECT_EQ(shared_names(key.relative_path()),
            (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                      "npc-entry.json"}));
}

// Jobs run on every thread at once, each over its thread's connection, and
// those added first run before those waiting, in the order they were
// added: with both threads held by a job each, "later", then "urgent" and
// "urgent too" (added first) are added, and one thread let go runs
// "urgent", "urgent too", then "later".
TEST_P(TransferThreadsTest, JobsRunOnEveryConnectionAndUrgentOnesFirst) {
  std::vector<std::shared_ptr<storage::Storage>> connections = {shared_storage(), shared_storage()};
  std::mutex mutex;
  std::condition_variable changed;
  int holding = 0;
  int let_go = 0; // holding jobs that may end, one each
  std::set<const storage::Storage*> used;
  std::vector<std::string> order;
  {
    TransferThreads threads(connections, *mirror);
    for (int i = 0; i < 2; ++i)
      threads.add([&](const cache::SharedTier& tier) {
        std::unique_lock guard(mutex);
        used.insert(tier.storage().get());
        ++holding;
        changed.notify_all();
        changed.wait(guard, [&] { return let_go > 0; });
        --let_go;
      });
    auto wait_until = [&](const std::function<bool()>& what, const char* says) {
      std::unique_lock guard(mutex);
      ASSERT_TRUE(changed.wait_for(guard, std::chrono::seconds(30), what)) << says;
    };
    wait_until([&] { return holding == 2; }, "both jobs run at once");
    auto note = [&](const char* name) {
      return [&, name](const cache::SharedTier&) {
        std::lock_guard guard(mutex);
        order.emplace_back(name);
        changed.notify_all();
      };
    };
    threads.add(note("later"));
    threads.add_first(note("urgent"));
    threads.add_first(note("urgent too"));
    {
      std::lock_guard guard(mutex);
      let_go = 1;
    }
    changed.notify_all();
    wait_until([&] { return order.size() == 3; }, "one thread runs all three");
    {
      std::lock_guard guard(mutex);
      let_go = 1;
    }
    changed.notify_all();
    threads.wait();
  }
  EXPECT_EQ(used, (std::set<const storage::Storage*>{connections[0].get(), connections[1].get()}));
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "urgent too", "later"}));
}

} // namespace
} // namespace npc::cluster
