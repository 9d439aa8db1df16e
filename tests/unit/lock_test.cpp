// storage/lock: one lock design over any storage. Each behaviour runs on a
// directory (LockTest) and on the run's S3 server (LockS3Test); what only one
// of them can show is tested there alone.

#include <npc/storage/lock.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <npc/storage/local.hpp>
#include <npc/storage/s3.hpp>
#include <npc/util/signals.hpp>

#include "files.hpp"
#include "forwarding_storage.hpp"
#include "s3_server.hpp"
#include "test_support.hpp"

namespace npc::storage {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

const std::string kLockKey = "neuronxcc-1.0/MODULE_1+abcdef01/model.hlo_module.pb.lock";
const Clock::time_point kT0 = Clock::time_point(std::chrono::seconds(1800000000));
constexpr LockTimes kTimes{600s, 3600s};

util::LockHolder holder(const std::string& tool) { return util::LockHolder::self(tool); }

pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Where the lock lives, whatever the backend.
class LockPlace {
public:
  virtual ~LockPlace() = default;
  [[nodiscard]] virtual std::shared_ptr<Storage> open() = 0;
  // A connection that shares what it learns of the server with the others
  // opened with `learned` (storage/open.hpp).
  [[nodiscard]] virtual std::shared_ptr<Storage> open_sharing(std::shared_ptr<storage::Learned> learned) = 0;

  Storage& storage() {
    if (!storage_) storage_ = open();
    return *storage_;
  }
  std::shared_ptr<Storage> shared() {
    storage();
    return storage_;
  }
  void put(const std::string& bytes) { ASSERT_TRUE(storage().write(kLockKey, bytes, storage::IfPresent::replace)); }
  std::optional<LockRecord> record() {
    auto text = storage().read(kLockKey, 1 << 20);
    return text ? LockRecord::parse(*text) : std::nullopt;
  }
  bool there() {
    auto info = storage().stat(kLockKey);
    return info && info->has_value();
  }
  // Judged `ahead` from now: a lock is aged by moving the clock, which an
  // object store allows as well as a directory.
  LockFacts judge(std::chrono::seconds ahead = 0s, std::chrono::seconds stale_age = 3600s) {
    auto facts = judge_lock(storage(), kLockKey, stale_age, Clock::now() + ahead);
    EXPECT_TRUE(facts) << facts.error();
    return facts ? *facts : LockFacts{};
  }
  Result<Lock::TakenOrHeld> take(const util::LockHolder& me, Clock::time_point now = Clock::now()) {
    return Lock::try_acquire(shared(), kLockKey, me, kTimes, now);
  }

private:
  std::shared_ptr<Storage> storage_;
};

class LockTest : public test::TempDirTest, public LockPlace {
protected:
  std::shared_ptr<Storage> open() override {
    return std::make_shared<LocalStorage>(dir() / "cache", dir() / "trash");
  }
  std::shared_ptr<Storage> open_sharing(std::shared_ptr<storage::Learned>) override { return open(); }
  fs::path file() const { return dir() / "cache" / kLockKey; }
};

class LockS3Test : public test::S3ServerTest, public LockPlace {
protected:
  std::shared_ptr<Storage> open() override { return open_sharing(nullptr); }
  std::shared_ptr<Storage> open_sharing(std::shared_ptr<storage::Learned> learned) override {
    auto client = S3Client::create(server_.config());
    if (!client) throw std::runtime_error(client.error());
    return std::make_shared<S3Storage>(std::move(*client), S3Location{test::kS3TestBucket, "c"}, std::move(learned));
  }
};

// Each behaviour below, on both backends.
#define ON_BOTH_BACKENDS(Name)                                                                                 \
  TEST_F(LockTest, Name) { Name(*this); }                                                                      \
  TEST_F(LockS3Test, Name) { Name(*this); }

void JudgesEachKindOfLock(LockPlace& place) {
  EXPECT_EQ(place.judge().state, LockState::absent);
  place.put(""); // torch-neuronx's: no owner facts
  EXPECT_EQ(place.judge().state, LockState::held);
  EXPECT_FALSE(place.judge().owner.has_value());
  EXPECT_EQ(place.judge(7200s).state, LockState::stale_old);
  EXPECT_EQ(place.judge(7200s, 3h).state, LockState::held);

  // An older release's record: owner facts, no expiry.
  util::LockHolder me = holder("test");
  place.put(me.serialize() + "\n");
  EXPECT_EQ(place.judge(7200s).state, LockState::held_alive) << "a live owner's lock is never stale, however old";
  util::LockHolder gone = me;
  gone.pid = dead_pid();
  place.put(gone.serialize() + "\n");
  EXPECT_EQ(place.judge().state, LockState::stale_dead);
  util::LockHolder reused = me; // our pid, but another process start
  reused.process_start = me.process_start + 1;
  place.put(reused.serialize() + "\n");
  EXPECT_EQ(place.judge().state, LockState::stale_dead);
  util::LockHolder rebooted = me;
  rebooted.boot_id = "00000000-0000-0000-0000-000000000000";
  place.put(rebooted.serialize() + "\n");
  EXPECT_EQ(place.judge().state, LockState::stale_dead);
  util::LockHolder elsewhere = me;
  elsewhere.host = "another-host";
  place.put(elsewhere.serialize() + "\n");
  EXPECT_EQ(place.judge().state, LockState::held) << "another host's owner cannot be checked";
  EXPECT_EQ(place.judge(7200s).state, LockState::stale_old);

  // Our record: another host's holds until its expiry, however young.
  const auto expires = std::chrono::duration_cast<std::chrono::seconds>((Clock::now() + 600s).time_since_epoch());
  place.put(LockRecord{elsewhere.serialize(), "t", expires.count()}.serialize());
  EXPECT_EQ(place.judge().state, LockState::held);
  // The expiry is whole seconds from a clock read before these judgements:
  // a margin for a slow run (TSan).
  EXPECT_EQ(place.judge(570s).state, LockState::held);
  EXPECT_EQ(place.judge(601s).state, LockState::stale_expired);
  EXPECT_EQ(place.judge(601s).owner->host, "another-host");
  // This host's: alive beats an expiry that passed (a holder stopped, not gone).
  place.put(LockRecord{me.serialize(), "t", expires.count()}.serialize());
  EXPECT_EQ(place.judge(7200s).state, LockState::held_alive);
  place.put(LockRecord{gone.serialize(), "t", expires.count()}.serialize());
  EXPECT_EQ(place.judge().state, LockState::stale_dead) << "a dead holder's lock need not wait for its expiry";
}
ON_BOTH_BACKENDS(JudgesEachKindOfLock)

void GarbageIsJudgedByItsAgeAsTheFrameworksLock(LockPlace& place) {
  for (std::string garbage : {std::string("\x00\x01\x02", 3), std::string(100000, 'x'), std::string("pid=abc"),
                              std::string("pid=-5 host=h"), std::string("pid=1 host=a\x7f" "b"),
                              std::string(R"({"owner":"x","token":"","expires":5})")}) {
    place.put(garbage);
    auto facts = place.judge();
    EXPECT_EQ(facts.state, LockState::held) << garbage.substr(0, 40);
    EXPECT_FALSE(facts.owner.has_value());
    EXPECT_EQ(place.judge(7200s).state, LockState::stale_old);
  }
  auto taken = place.take(holder("test"), Clock::now() + 7200s);
  ASSERT_TRUE(taken) << taken.error();
  EXPECT_TRUE(std::holds_alternative<Lock>(*taken)) << "garbage past the stale age is taken over";
}
ON_BOTH_BACKENDS(GarbageIsJudgedByItsAgeAsTheFrameworksLock)

void TakingWritesARecordAndReleasingRemovesOnlyOurs(LockPlace& place) {
  const util::LockHolder me = holder("test");
  auto taken = place.take(me, kT0);
  ASSERT_TRUE(taken) << taken.error();
  ASSERT_TRUE(std::holds_alternative<Lock>(*taken));
  auto& lock = std::get<Lock>(*taken);
  auto record = place.record();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->owner, me.serialize());
  EXPECT_EQ(record->token, lock.record().token);
  EXPECT_FALSE(record->token.empty());
  EXPECT_EQ(record->expires_unix, 1800000600);
  EXPECT_EQ(place.judge().state, LockState::held_alive);
  // Someone replaced it (clear-locks, then the framework's own lock).
  ASSERT_TRUE(place.storage().remove(kLockKey));
  place.put("");
  EXPECT_TRUE(lock.release());
  EXPECT_FALSE(lock.held());
  EXPECT_TRUE(place.there()) << "released somebody else's lock";
}
ON_BOTH_BACKENDS(TakingWritesARecordAndReleasingRemovesOnlyOurs)

// The lease, by the clock it is given: in force until the expiry of the
// last renewal that went through, lapsed from then on; a renewal moves it.
void TheLeaseLapsesAtTheExpiryOfItsLastRenewal(LockPlace& place) {
  auto taken = Lock::try_acquire(place.shared(), kLockKey, holder("test"), {60s, 3600s}, kT0);
  ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
  auto& lock = std::get<Lock>(*taken);
  EXPECT_FALSE(lock.lease_lapsed(kT0));
  EXPECT_FALSE(lock.lease_lapsed(kT0 + 59s));
  EXPECT_TRUE(lock.lease_lapsed(kT0 + 60s));
  ASSERT_TRUE(lock.renew(kT0 + 50s));
  EXPECT_FALSE(lock.lease_lapsed(kT0 + 109s));
  EXPECT_TRUE(lock.lease_lapsed(kT0 + 110s));
  EXPECT_EQ(place.record()->expires_unix, lock.record().expires_unix);
  // A renewal that fails (the lock is someone else's now) moves nothing.
  ASSERT_TRUE(place.storage().remove(kLockKey));
  place.put("");
  EXPECT_FALSE(lock.renew(kT0 + 100s));
  EXPECT_TRUE(lock.lease_lapsed(kT0 + 110s));
  ASSERT_TRUE(lock.release());
  EXPECT_TRUE(lock.lease_lapsed(kT0)) << "a released lock holds nothing";
}
ON_BOTH_BACKENDS(TheLeaseLapsesAtTheExpiryOfItsLastRenewal)

void AFreshLockWithoutOwnerKeepsUsOutAndAStaleOneIsTakenOver(LockPlace& place) {
  place.put("");
  auto attempt = place.take(holder("test"));
  ASSERT_TRUE(attempt) << attempt.error();
  ASSERT_TRUE(std::holds_alternative<Lock::Held>(*attempt));
  EXPECT_EQ(std::get<Lock::Held>(*attempt).facts.state, LockState::held);
  EXPECT_EQ(std::get<Lock::Held>(*attempt).facts.describe().rfind("without owner facts", 0), 0u);
  EXPECT_TRUE(place.there());
  attempt = place.take(holder("test"), Clock::now() + 7200s);
  ASSERT_TRUE(attempt) << attempt.error();
  ASSERT_TRUE(std::holds_alternative<Lock>(*attempt));
  EXPECT_TRUE(place.record().has_value()) << "the lock is ours now";
  EXPECT_TRUE(std::get<Lock>(*attempt).release());
  EXPECT_FALSE(place.there());
}
ON_BOTH_BACKENDS(AFreshLockWithoutOwnerKeepsUsOutAndAStaleOneIsTakenOver)

void TheNextIsToldWhoHoldsIt(LockPlace& place) {
  util::LockHolder node_a = holder("node-a");
  node_a.host = "node-a";
  auto first = place.take(node_a, kT0);
  ASSERT_TRUE(first && std::holds_alternative<Lock>(*first));
  const std::string token = std::get<Lock>(*first).record().token;
  auto second = Lock::try_acquire(place.shared(), kLockKey, holder("node-b"), kTimes, kT0 + 599s);
  ASSERT_TRUE(second) << second.error();
  ASSERT_TRUE(std::holds_alternative<Lock::Held>(*second));
  EXPECT_EQ(std::get<Lock::Held>(*second).facts.holder(), node_a.describe() + ", until 2027-01-15T08:10:00Z");
  EXPECT_EQ(place.record()->token, token); // untouched
}
ON_BOTH_BACKENDS(TheNextIsToldWhoHoldsIt)

void ALockPastItsExpiryIsTakenOverAndItsOldHolderLeavesTheNewOne(LockPlace& place) {
  util::LockHolder node_a = holder("node-a");
  node_a.host = "node-a"; // liveness unknown here: its expiry decides
  auto first = place.take(node_a, kT0);
  ASSERT_TRUE(first && std::holds_alternative<Lock>(*first));
  auto second = place.take(holder("node-b"), kT0 + 601s);
  ASSERT_TRUE(second) << second.error();
  ASSERT_TRUE(std::holds_alternative<Lock>(*second));
  const std::string new_token = std::get<Lock>(*second).record().token;
  EXPECT_EQ(place.record()->token, new_token);
  // The stalled first holder: cannot renew, and its release spares the new lock.
  auto& stalled = std::get<Lock>(*first);
  auto renewed = stalled.renew(kT0 + 602s);
  ASSERT_FALSE(renewed.ok());
  EXPECT_NE(renewed.error().find("is no longer ours (held by"), std::string::npos) << renewed.error();
  ASSERT_TRUE(stalled.release());
  EXPECT_EQ(place.record()->token, new_token);
  ASSERT_TRUE(std::get<Lock>(*second).release());
  EXPECT_FALSE(place.there());
}
ON_BOTH_BACKENDS(ALockPastItsExpiryIsTakenOverAndItsOldHolderLeavesTheNewOne)

void RenewalMovesTheExpiry(LockPlace& place) {
  util::LockHolder node_a = holder("node-a");
  node_a.host = "node-a";
  auto taken = place.take(node_a, kT0);
  ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
  auto& lock = std::get<Lock>(*taken);
  ASSERT_TRUE(lock.renew(kT0 + 500s));
  EXPECT_EQ(place.record()->expires_unix, 1800001100);
  EXPECT_EQ(place.record()->token, lock.record().token);
  // Renewed, it is not stale where the first expiry would have been.
  auto other = place.take(holder("node-b"), kT0 + 700s);
  ASSERT_TRUE(other);
  EXPECT_TRUE(std::holds_alternative<Lock::Held>(*other));
}
ON_BOTH_BACKENDS(RenewalMovesTheExpiry)

// The renewing thread works on the lock's state, which a move of the Lock
// does not touch; its period here is short, its time to live 5 s.
void KeptRenewedEvenAfterAMove(LockPlace& place) {
  auto taken = Lock::try_acquire(place.shared(), kLockKey, holder("node-a"), {5s, 3600s}, Clock::now() - 1h);
  ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
  const std::int64_t first = place.record()->expires_unix;
  Lock moved;
  {
    Lock& lock = std::get<Lock>(*taken);
    lock.keep_renewed(20ms);
    moved = std::move(lock);
  }
  for (int i = 0; i < 500 && place.record()->expires_unix == first; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(place.record()->expires_unix, first + 3600);
  EXPECT_EQ(place.record()->token, moved.record().token);
  ASSERT_TRUE(moved.release());
  EXPECT_FALSE(place.there()) << "a renewal after the release brought the lock back";
}
ON_BOTH_BACKENDS(KeptRenewedEvenAfterAMove)

void DestroyingTheLockReleasesIt(LockPlace& place) {
  {
    auto taken = place.take(holder("node-a"));
    ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
    std::get<Lock>(*taken).keep_renewed();
    EXPECT_TRUE(place.there());
  }
  EXPECT_FALSE(place.there());
}
ON_BOTH_BACKENDS(DestroyingTheLockReleasesIt)

// A holder on this host that is gone (killed mid-compile) leaves its lock
// unexpired: it is taken over at once, not at its expiry.
void ALockOfADeadProcessOfThisHostIsTakenOverAtOnce(LockPlace& place) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto own = place.open();
    auto got = Lock::try_acquire(own, kLockKey, holder("killed"), kTimes, Clock::now());
    ::_exit(got && std::holds_alternative<Lock>(*got) ? 0 : 1); // no release: as by SIGKILL
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(util::LockHolder::parse(place.record()->owner)->pid, child);
  EXPECT_EQ(place.judge().state, LockState::stale_dead);
  auto next = place.take(holder("next"));
  ASSERT_TRUE(next) << next.error();
  ASSERT_TRUE(std::holds_alternative<Lock>(*next));
  EXPECT_EQ(util::LockHolder::parse(place.record()->owner)->pid, ::getpid());
}
ON_BOTH_BACKENDS(ALockOfADeadProcessOfThisHostIsTakenOverAtOnce)

void BreakingLeavesALockThatReplacedTheJudgedOne(LockPlace& place) {
  place.put("");
  auto judged = place.judge(7200s);
  ASSERT_EQ(judged.state, LockState::stale_old);
  // Between our look and our break, someone cleared it and took a new one.
  ASSERT_TRUE(place.storage().remove(kLockKey));
  place.put(LockRecord{holder("other").serialize(), "fresh", 0}.serialize());
  auto broken = break_lock(place.storage(), kLockKey, judged);
  ASSERT_TRUE(broken) << broken.error();
  EXPECT_FALSE(*broken);
  ASSERT_TRUE(place.record().has_value());
  EXPECT_EQ(place.record()->token, "fresh");
  // What was judged goes.
  auto now_judged = place.judge(7200s);
  now_judged.state = LockState::stale_old; // as a clear-locks would
  broken = break_lock(place.storage(), kLockKey, now_judged);
  ASSERT_TRUE(broken) << broken.error();
  EXPECT_TRUE(*broken);
  EXPECT_FALSE(place.there());
}
ON_BOTH_BACKENDS(BreakingLeavesALockThatReplacedTheJudgedOne)

// `racers` threads started at once, each with a storage of its own, each
// making one attempt at the lock `key`: the lock it took, or nullopt (held
// by another); the counts of taken, held and errors, with the locks taken.
struct RaceEnd {
  int taken = 0, held = 0, errors = 0;
  std::vector<std::optional<Lock>> locks;
};
using Attempt = std::function<Result<std::optional<Lock>>(std::shared_ptr<Storage>, const std::string& key)>;
RaceEnd race(const std::vector<std::shared_ptr<Storage>>& storages, const std::string& key, const Attempt& attempt) {
  const int racers = static_cast<int>(storages.size());
  std::latch start(racers);
  std::atomic<int> taken{0}, held{0}, errors{0};
  RaceEnd end;
  end.locks.resize(storages.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < racers; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto got = attempt(storages[i], key);
      if (!got) ++errors;
      else if (*got) {
        ++taken;
        end.locks[i] = std::move(*got);
      } else {
        ++held;
      }
    });
  for (auto& t : threads) t.join();
  end.taken = taken;
  end.held = held;
  end.errors = errors;
  return end;
}

// One Lock::try_acquire: the lock taken, or nullopt when held by another.
Result<std::optional<Lock>> acquire_once(std::shared_ptr<Storage> storage, const std::string& key) {
  auto got = Lock::try_acquire(std::move(storage), key, holder("racer"), kTimes, Clock::now());
  if (!got) return fail(got.error());
  if (auto* lock = std::get_if<Lock>(&*got)) return std::optional<Lock>(std::move(*lock));
  return std::optional<Lock>{};
}

// Racers for one lock, six threads at once, three rounds, each with a
// storage of its own: one takes it.
void OneOfTheRacersTakesIt(LockPlace& place) {
  constexpr int kRacers = 6;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<Storage>> storages;
    for (int i = 0; i < kRacers; ++i) storages.push_back(place.open());
    auto end = race(storages, "race-" + std::to_string(round) + "/model.hlo_module.pb.lock",
                    acquire_once);
    EXPECT_EQ(end.errors, 0);
    EXPECT_EQ(end.taken, 1) << "round " << round;
    EXPECT_EQ(end.held, kRacers - 1) << "round " << round;
  }
}
ON_BOTH_BACKENDS(OneOfTheRacersTakesIt)

// Racers for a lock another host left stale (its lease lapsed), six threads
// at once, three rounds: one takes it over, the others find it held by that
// one, never two takers (which would each compile the graph).
void OneOfTheRacersTakesOverAStaleLock(LockPlace& place) {
  constexpr int kRacers = 6;
  for (int round = 0; round < 3; ++round) {
    const std::string key = "stale-" + std::to_string(round) + "/model.hlo_module.pb.lock";
    util::LockHolder elsewhere = holder("neuron_cc_wrapper");
    elsewhere.host = "a-dead-host";
    const auto lapsed = std::chrono::duration_cast<std::chrono::seconds>((Clock::now() - 5s).time_since_epoch());
    ASSERT_TRUE(place.storage().write(key, LockRecord{elsewhere.serialize(), "dead", lapsed.count()}.serialize(), storage::IfPresent::replace));
    std::vector<std::shared_ptr<Storage>> storages;
    for (int i = 0; i < kRacers; ++i) {
      storages.push_back(place.open());
      // Rounds 1 and 2 as a launcher takes locks, knowing what the storage
      // promises; round 0 without.
      if (round > 0) {
        ASSERT_EQ(storages.back()->probe().reach, storage::Reach::usable);
      }
    }
    auto end = race(storages, key,
                    acquire_once);
    EXPECT_EQ(end.errors, 0);
    EXPECT_EQ(end.taken, 1) << "round " << round;
    EXPECT_EQ(end.held, kRacers - 1) << "round " << round;
    for (auto& lock : end.locks) {
      if (lock) {
        EXPECT_TRUE(lock->release());
      }
    }
  }
}
ON_BOTH_BACKENDS(OneOfTheRacersTakesOverAStaleLock)

// s3rver ignores If-None-Match: racers all pass the HEAD and all PUT. The
// read-back after the settle time leaves one holder.
class LockS3rverTest : public LockS3Test {
protected:
  [[nodiscard]] test::S3Backend backend() const override { return test::S3Backend::s3rver; }
};
TEST_F(LockS3rverTest, OneOfTheRacersTakesItOnAServerThatIgnoresTheCondition) { OneOfTheRacersTakesIt(*this); }

// The server's storage, counting the reads of the lock.
class ReadCounter : public test::ForwardingStorage {
public:
  using ForwardingStorage::ForwardingStorage;
  using ForwardingStorage::read;
  Result<bool> read(std::string_view key, const storage::Into& into) const override {
    ++reads;
    return ForwardingStorage::read(key, into);
  }
  mutable int reads = 0;
};

// Where the condition is ignored, a created lock is read back after the
// settle time, unless no one else can name it (a launcher's own place on
// its roll): then the create is the lock.
TEST_F(LockS3rverTest, ALockNoOneElseCanNameIsTakenWithoutTheReadBack) {
  ASSERT_FALSE(storage().exclusive_create_is_exact());
  for (auto racers : {Lock::Racers::possible, Lock::Racers::none}) {
    auto counted = std::make_shared<ReadCounter>(shared());
    auto taken = Lock::try_acquire(counted, kLockKey, holder("roll"), kTimes, Clock::now(), racers);
    ASSERT_TRUE(taken) << taken.error();
    ASSERT_TRUE(std::holds_alternative<Lock>(*taken));
    EXPECT_EQ(counted->reads, racers == Lock::Racers::none ? 0 : 1);
    EXPECT_TRUE(record().has_value());
    EXPECT_TRUE(std::get<Lock>(*taken).release());
    EXPECT_FALSE(there());
  }
}

// Racers that each create once (Lock::try_create, what the launcher does
// before a worker starts): in round 0 opened sharing what they learn (as a
// launcher's connections, all opened by one cache::Tiers), of which the
// first learned what the storage promises; in the other rounds each
// learned for itself.
void OneCreatorOfManyTakesIt(LockPlace& place, bool exact) {
  constexpr int kRacers = 6;
  for (int round = 0; round < 3; ++round) {
    const std::string key = "create-" + std::to_string(round) + "/model.hlo_module.pb.lock";
    std::vector<std::shared_ptr<Storage>> storages;
    auto learned = std::make_shared<storage::Learned>();
    for (int i = 0; i < kRacers; ++i) {
      storages.push_back(round == 0 ? place.open_sharing(learned) : place.open());
      if (round != 0 || i == 0) {
        auto probe = storages.back()->probe();
        ASSERT_EQ(probe.reach, storage::Reach::usable) << probe.detail;
      }
      EXPECT_EQ(storages.back()->exclusive_create_is_exact(), exact) << "round " << round << ", racer " << i;
    }
    auto end = race(storages, key, [](std::shared_ptr<Storage> storage, const std::string& key) {
      return Lock::try_create(std::move(storage), key, holder("create"), kTimes, Clock::now());
    });
    EXPECT_EQ(end.errors, 0);
    EXPECT_EQ(end.taken, 1) << "round " << round;
    EXPECT_EQ(end.held, kRacers - 1) << "round " << round;
    for (auto& lock : end.locks) {
      if (!lock) continue;
      EXPECT_TRUE(lock->release());
    }
    EXPECT_FALSE(place.storage().stat(key).value().has_value()) << "released";
  }
}
TEST_F(LockTest, OneCreatorOfManyTakesIt) { OneCreatorOfManyTakesIt(*this, true); }
TEST_F(LockS3Test, OneCreatorOfManyTakesItAfterLearningTheGatewayHonoursTheCondition) {
  OneCreatorOfManyTakesIt(*this, true);
  // The probes are gone.
  auto probes = storage().list_tree(".npc/create-probe");
  ASSERT_TRUE(probes) << probes.error();
  EXPECT_TRUE(probes->empty());
}
TEST_F(LockS3rverTest, OneCreatorOfManyTakesItWhereTheConditionIsIgnored) { OneCreatorOfManyTakesIt(*this, false); }

// try_create leaves a lock it finds as it is, stale or not: breaking one is
// try_acquire's.
void CreateLeavesAStaleLockAlone(LockPlace& place) {
  ASSERT_EQ(place.storage().probe().reach, storage::Reach::usable);
  util::LockHolder gone = holder("test");
  gone.pid = dead_pid();
  place.put(LockRecord{gone.serialize(), "t0", 0}.serialize());
  auto created = Lock::try_create(place.shared(), kLockKey, holder("test"), kTimes, Clock::now());
  ASSERT_TRUE(created) << created.error();
  EXPECT_FALSE(created->has_value());
  EXPECT_EQ(place.record()->token, "t0");
  auto taken = place.take(holder("test"));
  ASSERT_TRUE(taken) << taken.error();
  ASSERT_TRUE(std::holds_alternative<Lock>(*taken));
  EXPECT_NE(place.record()->token, "t0");
}
ON_BOTH_BACKENDS(CreateLeavesAStaleLockAlone)

// A lock judged from a listing (its size and time from there, one read) is
// judged as judge_lock judges it.
void JudgesAListedLockAsAStatAndAReadWould(LockPlace& place) {
  util::LockHolder me = holder("test");
  place.put(LockRecord{me.serialize(), "t1", 0}.serialize());
  auto listed = place.storage().list_tree("neuronxcc-1.0/MODULE_1+abcdef01");
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  auto facts = judge_listed_lock(place.storage(), kLockKey, listed->front().size, listed->front().modified, 3600s,
                                 Clock::now());
  ASSERT_TRUE(facts) << facts.error();
  EXPECT_EQ(facts->state, LockState::held_alive);
  EXPECT_EQ(facts->state, place.judge().state);
  EXPECT_EQ(facts->record->token, "t1");
  // Gone since the listing: absent.
  ASSERT_TRUE(place.storage().remove(kLockKey));
  facts = judge_listed_lock(place.storage(), kLockKey, listed->front().size, listed->front().modified, 3600s,
                            Clock::now());
  ASSERT_TRUE(facts) << facts.error();
  EXPECT_EQ(facts->state, LockState::absent);
}
ON_BOTH_BACKENDS(JudgesAListedLockAsAStatAndAReadWould)

// --- a directory only ------------------------------------------------------------

// Many processes race for one lock at once, repeatedly: never two holders,
// and no lock left when all are done.
TEST_F(LockTest, ManyProcessesAtOnceNeverHoldTogether) {
  constexpr int kProcesses = 16, kRounds = 50;
  fs::path inside = dir() / "inside";
  fs::path overlaps = dir() / "overlaps";
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto own = open();
      int taken = 0;
      while (taken < kRounds) {
        auto got = Lock::try_acquire(own, kLockKey, holder("race"), kTimes, Clock::now());
        if (!got) {
          std::fprintf(stderr, "%s\n", got.error().c_str());
          ::_exit(3);
        }
        if (!std::holds_alternative<Lock>(*got)) continue;
        int fd = ::open(inside.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) {
          int o = ::open(overlaps.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
          std::ignore = ::write(o, "x", 1);
          ::close(o);
        } else {
          ::close(fd);
          ::unlink(inside.c_str());
        }
        if (!std::get<Lock>(*got).release()) ::_exit(4);
        ++taken;
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_FALSE(fs::exists(overlaps)) << "two processes held the lock at once";
  EXPECT_FALSE(fs::exists(file())) << "a lock outlived its holders";
  EXPECT_EQ(test::names_in(file().parent_path()), std::vector<std::string>{}) << "a temp file was left";
}

// A breaker that finds the judged file replaced by an identical one (two
// empty framework locks) tells them apart by the time, to the nanosecond.
TEST_F(LockTest, BreakingLeavesAnIdenticalLockMadeSince) {
  put("");
  auto judged = judge(7200s);
  ASSERT_EQ(judged.state, LockState::stale_old);
  fs::remove(file());
  std::this_thread::sleep_for(10ms);
  put("");
  auto broken = break_lock(storage(), kLockKey, judged);
  ASSERT_TRUE(broken) << broken.error();
  EXPECT_FALSE(*broken);
  EXPECT_TRUE(fs::exists(file()));
  EXPECT_EQ(test::names_in(file().parent_path()), std::vector<std::string>{"model.hlo_module.pb.lock"});
}

TEST_F(LockTest, ADirectoryWhereTheLockBelongsIsJudgedByItsAge) {
  fs::create_directories(file());
  EXPECT_EQ(judge().state, LockState::held);
  auto judged = judge(7200s);
  ASSERT_EQ(judged.state, LockState::stale_old);
  auto broken = break_lock(storage(), kLockKey, judged);
  ASSERT_TRUE(broken) << broken.error();
  EXPECT_TRUE(*broken);
  EXPECT_FALSE(fs::exists(file()));
}

// The compile waits for its compiler with SIGCHLD blocked, reading it from a
// signalfd; the renewing thread must not take the signal from it (it did: a
// compile under an S3 lock then hung after its compiler exited).
// A renewal that fails is tried again sooner than the period (1 s, then 2 s,
// ...): with a period of 5 s and the first two renewals refused, the third
// goes through about 8 s in, where waiting the period each time would take
// 15 s, past the lease of a lock renewed every third of it.
TEST_F(LockTest, AFailedRenewalIsTriedAgainSoonerThanThePeriod) {
  struct RefusingRenewals : test::ForwardingStorage {
    using ForwardingStorage::ForwardingStorage;
    Result<bool> change_if_unchanged(std::string_view key, const storage::Seen& seen,
                                     std::optional<std::string_view> replacement) override {
      if (!replacement) return ForwardingStorage::change_if_unchanged(key, seen, replacement);
      {
        std::lock_guard guard(mutex);
        tried_at.push_back(std::chrono::steady_clock::now());
        if (tried_at.size() <= 2) return fail("throttled");
      }
      return ForwardingStorage::change_if_unchanged(key, seen, replacement);
    }
    std::size_t tries() {
      std::lock_guard guard(mutex);
      return tried_at.size();
    }
    std::mutex mutex;
    std::vector<std::chrono::steady_clock::time_point> tried_at;
  };
  auto refusing = std::make_shared<RefusingRenewals>(shared());
  auto taken = Lock::try_acquire(refusing, kLockKey, holder("test"), {15s, 3600s}, Clock::now());
  ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
  auto& lock = std::get<Lock>(*taken);
  const auto first_expiry = record()->expires_unix;
  const auto started = std::chrono::steady_clock::now();
  lock.keep_renewed(5000ms);
  const auto deadline = started + 30s;
  auto renewed = [&] {
    auto now = record();
    return now && now->expires_unix > first_expiry;
  };
  while (!renewed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(renewed()) << "the third renewal went through";
  ASSERT_TRUE(lock.release());
  ASSERT_GE(refusing->tries(), 3u);
  auto at = [&](std::size_t i) { return std::chrono::duration<double>(refusing->tried_at[i] - started).count(); };
  EXPECT_GE(at(0), 4.9);
  EXPECT_LT(at(1) - at(0), 2.0) << "the second try about 1 s after the first";
  EXPECT_LT(at(2), 12.0) << "the third about 2 s after the second, not a period";
}

TEST_F(LockTest, TheRenewingThreadTakesNoSignalFromItsProcess) {
  auto taken = take(holder("node-a"));
  ASSERT_TRUE(taken && std::holds_alternative<Lock>(*taken));
  std::get<Lock>(*taken).keep_renewed(1h);
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

} // namespace
} // namespace npc::storage
