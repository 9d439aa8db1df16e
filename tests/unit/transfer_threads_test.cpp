// launcher/transfer_threads: jobs over a connection each, the urgent ones
// first; the results a launcher's workers compiled into the mirror go up to
// the shared tier, each entry's lock released after its upload (on a
// directory and on the run's S3 server).

#include <npc/launcher/transfer_threads.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/shared_tier.hpp>

#include "two_tiers.hpp"

namespace npc::launcher {
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
} // namespace npc::launcher
