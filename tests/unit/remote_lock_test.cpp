// cache/remote_lock: an entry's lock as an object with owner and expiry, on
// a directory storage (exclusive creation by link(2), as AWS S3's
// conditional PUT) and on a real S3 server.

#include <npc/cache/remote_lock.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <npc/storage/local.hpp>
#include <npc/storage/s3.hpp>
#include <npc/util/signals.hpp>

#include "files.hpp"
#include "s3_server.hpp"
#include "test_support.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

const std::string kLockedEntry = "neuronxcc-1.0/MODULE_1+abcdef01";
const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(1800000000));

util::LockHolder holder(const std::string& tool) { return util::LockHolder::self(tool); }

class RemoteLockTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    storage = std::make_shared<storage::LocalStorage>(dir() / "remote", dir() / "trash");
  }
  fs::path lock_file() const { return dir() / "remote" / kLockedEntry / "model.hlo_module.pb.lock"; }
  std::optional<RemoteLockRecord> on_disk() const {
    return RemoteLockRecord::parse(test::read_text(lock_file()));
  }
  std::shared_ptr<storage::Storage> storage;
};

TEST_F(RemoteLockTest, TheFirstTakesItAndTheNextIsToldWhoHoldsIt) {
  // One holder value for the lock and the expectations: its "since" has a
  // resolution of a second, and a second may turn between two self() calls.
  const util::LockHolder node_a = holder("node-a");
  auto first = RemoteLock::try_acquire(storage, kLockedEntry, node_a, 600s, kT0);
  ASSERT_TRUE(first) << first.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock>(*first));
  const auto& taken = std::get<RemoteLock>(*first);
  auto record = on_disk();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->token, taken.record().token);
  EXPECT_EQ(record->expires_unix, 1800000600);
  EXPECT_EQ(record->owner, node_a.serialize());

  auto second = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-b"), 600s, kT0 + 599s);
  ASSERT_TRUE(second) << second.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock::Held>(*second));
  EXPECT_EQ(std::get<RemoteLock::Held>(*second).holder,
            node_a.describe() + ", until 2027-01-15T08:10:00Z");
  EXPECT_EQ(on_disk()->token, taken.record().token); // untouched
}

TEST_F(RemoteLockTest, ALockPastItsExpiryIsTakenOverAndItsOldHolderLeavesTheNewOne) {
  auto first = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 600s, kT0);
  ASSERT_TRUE(first && std::holds_alternative<RemoteLock>(*first));
  auto second = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-b"), 600s, kT0 + 601s);
  ASSERT_TRUE(second) << second.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock>(*second));
  const std::string new_token = std::get<RemoteLock>(*second).record().token;
  EXPECT_EQ(on_disk()->token, new_token);
  // The stalled first holder: cannot renew, and its release spares the new lock.
  auto& stalled = std::get<RemoteLock>(*first);
  auto renewed = stalled.renew(kT0 + 602s);
  ASSERT_FALSE(renewed.ok());
  EXPECT_NE(renewed.error().find("is no longer ours (held by"), std::string::npos) << renewed.error();
  ASSERT_TRUE(stalled.release().ok());
  EXPECT_EQ(on_disk()->token, new_token);
  // The new holder's release removes it.
  ASSERT_TRUE(std::get<RemoteLock>(*second).release().ok());
  EXPECT_FALSE(fs::exists(lock_file()));
}

TEST_F(RemoteLockTest, RenewalMovesTheExpiry) {
  auto taken = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 600s, kT0);
  ASSERT_TRUE(taken && std::holds_alternative<RemoteLock>(*taken));
  auto& lock = std::get<RemoteLock>(*taken);
  ASSERT_TRUE(lock.renew(kT0 + 500s).ok());
  EXPECT_EQ(on_disk()->expires_unix, 1800001100);
  // Renewed, it is not stale where the first expiry would have been.
  auto other = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-b"), 600s, kT0 + 700s);
  ASSERT_TRUE(other);
  EXPECT_TRUE(std::holds_alternative<RemoteLock::Held>(*other));
}

TEST_F(RemoteLockTest, SomethingThatIsNotALockRecordIsStale) {
  fs::create_directories(lock_file().parent_path());
  test::write_text(lock_file(), "\x01garbage");
  auto taken = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 600s, kT0);
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_TRUE(std::holds_alternative<RemoteLock>(*taken));
}

TEST_F(RemoteLockTest, DestroyingTheLockReleasesIt) {
  {
    auto taken = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 600s, kT0);
    ASSERT_TRUE(taken && std::holds_alternative<RemoteLock>(*taken));
    EXPECT_TRUE(fs::exists(lock_file()));
  }
  EXPECT_FALSE(fs::exists(lock_file()));
}

// A holder on this host that is gone (killed mid-upload) leaves its lock
// unexpired: it is taken over at once, not ten minutes later. A holder of
// another host is judged by the expiry alone (the test above).
TEST_F(RemoteLockTest, ALockOfADeadProcessOfThisHostIsTakenOverBeforeItsExpiry) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto own = std::make_shared<storage::LocalStorage>(dir() / "remote", dir() / "trash");
    auto got = RemoteLock::try_acquire(own, kLockedEntry, holder("killed"), 600s, Clock::now());
    ::_exit(got && std::holds_alternative<RemoteLock>(*got) ? 0 : 1); // no release: as by SIGKILL
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(util::LockHolder::parse(on_disk()->owner)->pid, child);
  auto next = RemoteLock::try_acquire(storage, kLockedEntry, holder("next"), 600s, Clock::now());
  ASSERT_TRUE(next) << next.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock>(*next));
  EXPECT_EQ(util::LockHolder::parse(on_disk()->owner)->pid, ::getpid());

  // Another host's lock, its holder unknown here: held until its expiry.
  ASSERT_TRUE(std::get<RemoteLock>(*next).release().ok());
  util::LockHolder elsewhere = holder("elsewhere");
  elsewhere.host = "other-node";
  elsewhere.boot_id = "other-boot";
  auto first = RemoteLock::try_acquire(storage, kLockedEntry, elsewhere, 600s, Clock::now());
  ASSERT_TRUE(first && std::holds_alternative<RemoteLock>(*first));
  auto second = RemoteLock::try_acquire(storage, kLockedEntry, holder("next"), 600s, Clock::now());
  ASSERT_TRUE(second) << second.error();
  EXPECT_TRUE(std::holds_alternative<RemoteLock::Held>(*second));
}

TEST_F(RemoteLockTest, OfManyProcessesRacingExactlyOneTakesIt) {
  constexpr int kProcesses = 12;
  std::vector<pid_t> children;
  fs::path results = dir() / "results";
  fs::create_directories(results);
  for (int i = 0; i < kProcesses; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto own = std::make_shared<storage::LocalStorage>(dir() / "remote", dir() / "trash");
      auto got = RemoteLock::try_acquire(own, kLockedEntry, holder("racer"), 600s, Clock::now());
      const char* what = !got ? "error" : std::holds_alternative<RemoteLock>(*got) ? "taken" : "held";
      test::write_text(results / std::to_string(::getpid()), what);
      if (got && std::holds_alternative<RemoteLock>(*got)) {
        // Alive until every racer has tried: a holder of this host that is
        // gone is taken over at once, which would make a second winner.
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (test::names_in(results).size() < static_cast<std::size_t>(kProcesses) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(10ms);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int taken = 0, held = 0;
  for (const auto& name : test::names_in(results)) {
    std::string what = test::read_text(results / name);
    taken += what == "taken";
    held += what == "held";
  }
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(held, kProcesses - 1);
}

TEST_F(RemoteLockTest, TheKeeperRenewsWhileItLives) {
  // Taken an hour ago: each renewal moves the expiry to about now + 5 s.
  auto taken = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 5s, Clock::now() - 1h);
  ASSERT_TRUE(taken && std::holds_alternative<RemoteLock>(*taken));
  auto& lock = std::get<RemoteLock>(*taken);
  const std::int64_t first = on_disk()->expires_unix;
  {
    RemoteLockKeeper keeper(lock, 20ms);
    for (int i = 0; i < 500 && on_disk()->expires_unix == first; ++i) std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(on_disk()->expires_unix, first + 3600);
  EXPECT_EQ(on_disk()->token, lock.record().token);
}

// The compile waits for its compiler with SIGCHLD blocked, reading it from a
// signalfd; a keeper's thread must not take the signal from it (it did: a
// compile under an S3 lock then hung after its compiler exited).
TEST_F(RemoteLockTest, TheKeeperThreadTakesNoSignalFromItsProcess) {
  auto taken = RemoteLock::try_acquire(storage, kLockedEntry, holder("node-a"), 600s, Clock::now());
  ASSERT_TRUE(taken && std::holds_alternative<RemoteLock>(*taken));
  RemoteLockKeeper keeper(std::get<RemoteLock>(*taken), 1h);
  util::SignalWatcher watcher({SIGCHLD});
  for (int i = 0; i < 20; ++i) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(0);
    std::vector<int> got;
    for (int waited = 0; waited < 50 && got.empty(); ++waited) got = watcher.wait(100);
    ASSERT_EQ(got, std::vector<int>{SIGCHLD}) << "round " << i;
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  }
}

// On a real S3 server: the same sequence through S3Storage.
class RemoteLockS3Test : public test::S3ServerTest {};

TEST_F(RemoteLockS3Test, TakenHeldExpiredAndReleased) {
  auto open = [&] {
    auto client = storage::S3Client::create(server_.config());
    if (!client) throw std::runtime_error(client.error());
    return std::make_shared<storage::S3Storage>(std::move(*client), storage::S3Location{test::kS3TestBucket, "c"});
  };
  auto a = open(), b = open();
  auto first = RemoteLock::try_acquire(a, kLockedEntry, holder("node-a"), 600s, kT0);
  ASSERT_TRUE(first) << first.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock>(*first));
  auto second = RemoteLock::try_acquire(b, kLockedEntry, holder("node-b"), 600s, kT0 + 10s);
  ASSERT_TRUE(second) << second.error();
  EXPECT_TRUE(std::holds_alternative<RemoteLock::Held>(*second));
  auto third = RemoteLock::try_acquire(b, kLockedEntry, holder("node-b"), 600s, kT0 + 601s);
  ASSERT_TRUE(third) << third.error();
  ASSERT_TRUE(std::holds_alternative<RemoteLock>(*third));
  ASSERT_TRUE(std::get<RemoteLock>(*first).release().ok()); // not its own any more: kept
  auto listed = b->list(kLockedEntry);
  ASSERT_TRUE(listed);
  EXPECT_EQ(*listed, std::vector<std::string>{"model.hlo_module.pb.lock"});
  ASSERT_TRUE(std::get<RemoteLock>(*third).release().ok());
  listed = b->list(kLockedEntry);
  ASSERT_TRUE(listed);
  EXPECT_EQ(*listed, std::vector<std::string>{});
}

// Racers for one lock, six at once, three rounds: one takes it.
void one_of_the_racers_takes_the_lock(const storage::S3Config& config) {
  constexpr int kRacers = 6;
  for (int round = 0; round < 3; ++round) {
    const std::string entry = kLockedEntry + "-" + std::to_string(round);
    std::vector<std::shared_ptr<storage::Storage>> storages;
    for (int i = 0; i < kRacers; ++i) {
      auto client = storage::S3Client::create(config);
      ASSERT_TRUE(client) << client.error();
      storages.push_back(std::make_shared<storage::S3Storage>(std::move(*client),
                                                              storage::S3Location{test::kS3TestBucket, "c"}));
    }
    std::latch start(kRacers);
    std::atomic<int> taken{0}, held{0}, errors{0};
    std::vector<std::optional<RemoteLock>> locks(kRacers);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRacers; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        auto got = RemoteLock::try_acquire(storages[i], entry, holder("racer"), 600s, Clock::now());
        if (!got) ++errors;
        else if (auto* lock = std::get_if<RemoteLock>(&*got)) {
          ++taken;
          locks[i].emplace(std::move(*lock));
        } else ++held;
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(taken.load(), 1) << "round " << round;
    EXPECT_EQ(held.load(), kRacers - 1) << "round " << round;
  }
}

// The server lets one create-only PUT win (412 for the others), as AWS S3 does.
TEST_F(RemoteLockS3Test, OfRacersOneTakesIt) { one_of_the_racers_takes_the_lock(server_.config()); }

// s3rver ignores If-None-Match: racers all pass the HEAD and all PUT. The
// read-back after the settle time leaves one holder.
class RemoteLockS3rverTest : public RemoteLockS3Test {
protected:
  [[nodiscard]] test::S3Backend backend() const override { return test::S3Backend::s3rver; }
};

TEST_F(RemoteLockS3rverTest, OfRacersOnAServerThatIgnoresTheConditionOneTakesIt) {
  one_of_the_racers_takes_the_lock(server_.config());
}

} // namespace
} // namespace npc::cache
