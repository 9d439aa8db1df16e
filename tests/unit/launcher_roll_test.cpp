// cluster/launcher_roll: launchers on one shared cache keep a roll there,
// on a directory and on the run's S3 server: each sees the others that
// joined, none that left or stopped renewing, and what dead launchers left
// goes at the next join.

#include <npc/cluster/launcher_roll.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>

#include "two_tiers.hpp"

namespace npc::cluster {
namespace {

using namespace std::chrono_literals;

class LauncherRollTest : public test::MirrorAndSharedTest {
protected:
  std::unique_ptr<LauncherRoll> join() {
    auto joined = LauncherRoll::join(shared_storage(), shared_storage());
    EXPECT_TRUE(joined) << joined.error();
    return joined ? std::move(*joined) : nullptr;
  }
  std::vector<std::string> members(const LauncherRoll& roll, storage::Time at = std::chrono::system_clock::now()) {
    auto names = roll.members(at);
    EXPECT_TRUE(names) << names.error();
    return names ? *names : std::vector<std::string>{};
  }
  std::size_t records() {
    auto listed = shared_storage()->list_tree(kRollFolder);
    EXPECT_TRUE(listed) << listed.error();
    return listed ? listed->size() : 0;
  }
};

INSTANTIATE_TEST_SUITE_P(DirectoryAndS3, LauncherRollTest,
                         ::testing::Values(test::SharedBackend::directory, test::SharedBackend::s3),
                         test::shared_backend_name);

// Three launchers join: each sees all three, sorted, itself among them, by
// a name that starts with its host. One leaves: the others no longer see
// it, and its record is gone.
TEST_P(LauncherRollTest, EachSeesTheOthersThatJoinedAndNotThoseThatLeft) {
  auto a = join();
  auto b = join();
  auto c = join();
  ASSERT_TRUE(a && b && c);
  EXPECT_NE(a->self().find("." + std::to_string(::getpid()) + "."), std::string::npos) << a->self();
  EXPECT_NE(a->self(), b->self());
  std::vector<std::string> all = {a->self(), b->self(), c->self()};
  std::sort(all.begin(), all.end());
  EXPECT_EQ(members(*a), all);
  EXPECT_EQ(members(*b), all);
  EXPECT_EQ(members(*c), all);
  EXPECT_EQ(records(), 3u);
  const std::string left = b->self();
  b.reset();
  all.erase(std::find(all.begin(), all.end(), left));
  EXPECT_EQ(members(*a), all);
  EXPECT_EQ(members(*c), all);
  EXPECT_EQ(records(), 2u);
  a.reset();
  c.reset();
  EXPECT_EQ(records(), 0u);
}

// A record unrenewed for a lifetime (its lease, 60 s) is off the roll (its
// launcher died, or lost the store); this launcher always counts itself.
TEST_P(LauncherRollTest, ALauncherThatStoppedRenewingIsOffTheRoll) {
  auto a = join();
  auto b = join();
  ASSERT_TRUE(a && b);
  auto both = std::vector<std::string>{a->self(), b->self()};
  std::sort(both.begin(), both.end());
  const auto within = std::chrono::system_clock::now() + kRollRecordLife - 5s;
  EXPECT_EQ(members(*a, within), both);
  const auto later = std::chrono::system_clock::now() + kRollRecordLife + 5s;
  EXPECT_EQ(members(*a, later), std::vector<std::string>{a->self()});
  EXPECT_EQ(members(*b, later), std::vector<std::string>{b->self()});
}

// changed(): the first call looks; later ones only when a look is due
// (every second early in the run, then every ten) and the roll changed.
TEST_P(LauncherRollTest, ChangesAreToldWhenALookIsDue) {
  auto a = join();
  ASSERT_TRUE(a);
  auto first = a->changed(100.0);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, std::vector<std::string>{a->self()});
  EXPECT_FALSE(a->changed(100.5)) << "no look due";
  EXPECT_FALSE(a->changed(101.0)) << "looked: nothing changed";
  auto b = join();
  ASSERT_TRUE(b);
  EXPECT_FALSE(a->changed(101.5)) << "no look due";
  auto second = a->changed(102.0);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->size(), 2u);
  // Past the early looks: ten seconds apart.
  EXPECT_FALSE(a->changed(111.0));
  b.reset();
  EXPECT_FALSE(a->changed(115.0)) << "no look due";
  auto third = a->changed(121.0);
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, std::vector<std::string>{a->self()});
}

// Eight launchers join at once, each on a connection of its own: each sees
// all eight.
TEST_P(LauncherRollTest, LaunchersJoiningAtOnceAllSeeEachOther) {
  constexpr int kLaunchers = 8;
  std::vector<std::unique_ptr<LauncherRoll>> rolls(kLaunchers);
  std::vector<std::shared_ptr<storage::Storage>> connections;
  for (int i = 0; i < kLaunchers; ++i) connections.push_back(shared_storage());
  std::vector<std::thread> threads;
  for (int i = 0; i < kLaunchers; ++i)
    threads.emplace_back([&, i] {
      auto joined = LauncherRoll::join(connections[static_cast<std::size_t>(i)], shared_storage());
      if (joined) rolls[static_cast<std::size_t>(i)] = std::move(*joined);
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> all;
  for (const auto& roll : rolls) {
    ASSERT_TRUE(roll);
    all.push_back(roll->self());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end()) << "names are unique";
  for (const auto& roll : rolls) EXPECT_EQ(members(*roll), all);
  rolls.clear();
  EXPECT_EQ(records(), 0u);
}

// What a dead launcher left unrenewed for ten minutes goes when another
// joins; a record unrenewed for three minutes is off the roll but stays. (A
// directory, where a file's time can be set back; S3 keeps its own.)
class LauncherRollLeftoverTest : public test::TwoTiersTest {};

TEST_F(LauncherRollLeftoverTest, ADeadLaunchersRecordGoesAtTheNextJoin) {
  auto storage = remote_storage();
  ASSERT_TRUE(storage->write(std::string(kRollFolder) + "/dead.1.00000000.json", "{}", storage::IfPresent::replace).ok());
  ASSERT_TRUE(storage->write(std::string(kRollFolder) + "/quiet.1.00000000.json", "{}", storage::IfPresent::replace).ok());
  const fs::path folder = dir() / "remote" / kRollFolder;
  fs::last_write_time(folder / "dead.1.00000000.json",
                      fs::file_time_type::clock::now() - kRollRecordLeftover - 1min);
  fs::last_write_time(folder / "quiet.1.00000000.json", fs::file_time_type::clock::now() - 3min);
  auto joined = LauncherRoll::join(storage, remote_storage());
  ASSERT_TRUE(joined) << joined.error();
  EXPECT_FALSE(fs::exists(folder / "dead.1.00000000.json"));
  EXPECT_TRUE(fs::exists(folder / "quiet.1.00000000.json"));
  auto names = (*joined)->members(std::chrono::system_clock::now());
  ASSERT_TRUE(names) << names.error();
  EXPECT_EQ(*names, std::vector<std::string>{(*joined)->self()});
}

// Membership is a lease: a launcher of this host that was killed is off the
// roll at once (its record names a pid that runs no more), not a lifetime
// later; one of another host is judged by its record's renewals; a name
// held by a live launcher is refused, saying who.
TEST_F(LauncherRollLeftoverTest, ALauncherOfThisHostThatDiedIsOffTheRollAtOnce) {
  auto storage = remote_storage();
  auto record = [](pid_t pid, const std::string& host) {
    util::LockHolder holder = util::LockHolder::self("neuron_parallel_compile");
    holder.pid = pid;
    holder.host = host;
    if (host != util::this_host()) holder.boot_id = "another-boot";
    const auto expires = std::chrono::system_clock::now() + kRollRecordLife;
    return storage::LockRecord{holder.serialize(), "token",
                               std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count()}
        .serialize();
  };
  std::string here;
  for (char c : util::this_host()) here += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  const std::string dead_here = here + ".999999.0badf00d";
  const std::string elsewhere = "other-host.999999.0badf00d";
  ASSERT_TRUE(storage->write(LauncherRoll::record_key(dead_here), record(999999, util::this_host()), storage::IfPresent::replace).ok());
  ASSERT_TRUE(storage->write(LauncherRoll::record_key(elsewhere), record(999999, "other-host"), storage::IfPresent::replace).ok());
  auto joined = LauncherRoll::join(storage, remote_storage());
  ASSERT_TRUE(joined) << joined.error();
  auto names = (*joined)->members(std::chrono::system_clock::now());
  ASSERT_TRUE(names) << names.error();
  std::vector<std::string> expected = {(*joined)->self(), elsewhere};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*names, expected);
  auto listed = storage->list_tree(kRollFolder);
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(listed->size(), 2u) << "the dead launcher's record is gone";

  auto again = LauncherRoll::join(remote_storage(), remote_storage(), (*joined)->self(), "the first launcher");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().rfind("the first launcher is already running: held by pid " + std::to_string(::getpid()), 0),
            0u)
      << again.error();
}

} // namespace
} // namespace npc::cluster
