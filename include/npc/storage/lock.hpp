#pragma once
// A lock as one object of a storage (storage.hpp): the same design for a
// cache in a directory and in an S3 bucket. A cache entry's lock is its
// model.hlo_module.pb.lock, the file torch-neuronx itself creates while it
// compiles the entry and waits on while it exists, so while we hold it a
// training run beside us waits for our compile instead of compiling again.
//
// Taking it: an exclusive create (link(2) in a directory, a create-only PUT
// on S3) of a record with the taker's owner facts (host, boot id, pid,
// process start, tool), a token unique to this taking, and an expiry. The
// holder renews the expiry while it holds the lock (keep_renewed). Where
// exclusive create is not exact (S3-compatible servers that ignore
// If-None-Match) the record is read back after a settle time, twice what
// our own create took: only the creator whose token stayed keeps it.
//
// Judging a lock someone else holds, by one rule (judge_lock):
//  - owner facts of this host and boot: alive (the pid runs with the same
//    start time) holds however old; gone (pid free or reused, or rebooted)
//    is stale at once;
//  - otherwise, a record with an expiry holds until it expires: only its
//    renewals prove a holder on another host alive;
//  - a lock without a record (torch-neuronx's is empty, older releases of
//    ours wrote owner facts only, or garbage) holds until it is older than
//    the stale-lock age: a framework compile killed with -9 leaves one that
//    would otherwise block for ever.
// A stale record of ours is taken over by replacing it while it is still
// the record judged (its token names one taking; on S3 a PUT If-Match its
// ETag), so of several launchers that judge it stale at once exactly one
// takes it. A stale lock without a record is removed only if it is still
// the object judged (same bytes, same modification time), then created
// anew: on S3, where a DELETE is not conditional, a remover slow between
// its look and its removal can remove a fresh lock, and that graph is
// compiled twice (the results are the same; the first stands).
// Releasing and renewing look first that the token is still ours, so a
// holder that stalled past its expiry never removes its successor's lock.
//
// The record is JSON, {"owner", "token", "expires"}; older releases of ours
// read it as a lock they cannot name the owner of, and wait for it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <npc/storage/storage.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/result.hpp>

namespace npc::storage {

// A holder's lease on its lock: renewed every third of it (20 s), so two
// renewals may fail to slow requests or throttling before it lapses; short,
// so that the graphs a dead host held are free to the survivors within a
// minute of its death. Clocks of the hosts must agree to well within it.
inline constexpr std::chrono::seconds kLockTtl{60};
// A lock without a provably live owner or an expiry is stale past this age.
// Large graphs compile for hours; `--lock-timeout` changes it.
inline constexpr std::chrono::seconds kDefaultStaleLockAge = std::chrono::hours(6);
// Bounds of the wait before a lock taken where exclusive create is not exact
// is read again (see above).
inline constexpr std::chrono::milliseconds kLockSettleMin{50};
inline constexpr std::chrono::milliseconds kLockSettleMax{2000};

struct LockTimes {
  std::chrono::seconds ttl = kLockTtl;
  std::chrono::seconds stale_age = kDefaultStaleLockAge;
};

struct LockRecord {
  std::string owner;              // util::LockHolder::serialize() of the taker
  std::string token;              // unique to one taking; empty in an older release's record
  std::int64_t expires_unix = 0;  // 0: none (an older release's record)

  [[nodiscard]] std::string serialize() const;
  // Our JSON record, or an older release's owner-facts line; nullopt for
  // anything else (the framework's empty lock, garbage).
  [[nodiscard]] static std::optional<LockRecord> parse(std::string_view text);
  [[nodiscard]] std::optional<util::LockHolder> holder() const { return util::LockHolder::parse(owner); }
};

enum class LockState {
  absent,
  held_alive,    // owner facts of a live process on this host
  held,          // unexpired, or without expiry and younger than the stale age
  stale_dead,    // its owner on this host is gone
  stale_expired, // its holder stopped renewing it
  stale_old      // no record, and older than the stale age
};
// "held", or why it is stale: "its owner is gone", "past its expiry", ...
[[nodiscard]] std::string_view to_string(LockState state);

struct LockFacts {
  LockState state = LockState::absent;
  std::optional<LockRecord> record;
  std::optional<util::LockHolder> owner; // nullopt: no (readable) owner facts
  double age_seconds = 0;
  // What was judged, so that only that object is broken.
  std::string bytes;
  Time modified;

  [[nodiscard]] bool blocks() const { return state == LockState::held_alive || state == LockState::held; }
  [[nodiscard]] bool stale() const { return state != LockState::absent && !blocks(); }
  // Held by a live process of this host, or by a record its holder keeps
  // renewing: what clear-locks keeps, since the lock is provably in use.
  [[nodiscard]] bool owner_proved_alive() const {
    return state == LockState::held_alive || (state == LockState::held && record && record->expires_unix > 0);
  }
  // "held by pid 12 on h (neuron_cc_wrapper), since ..., 3.0s old" /
  // "without owner facts (the framework's, or garbage), 42s old"
  [[nodiscard]] std::string describe() const;
  // Who: "pid 12 on h (neuron_cc_wrapper), since ..., until 12:00:00 UTC" /
  // "whoever made it (it names no owner), 42s ago"
  [[nodiscard]] std::string holder() const;
};

// Judges the lock object at `key`.
[[nodiscard]] Result<LockFacts> judge_lock(const Storage& storage, std::string_view key,
                                           std::chrono::seconds stale_age, Time now);
// Judges the lock object at `key` that a listing showed (its size and
// modification time): one read, not a stat and a read.
[[nodiscard]] Result<LockFacts> judge_listed_lock(const Storage& storage, std::string_view key, std::uint64_t size,
                                                  Time modified, std::chrono::seconds stale_age, Time now);
// Judges a lock object read before (its bytes and modification time), as
// judge_lock would now: a watcher that sees the same object listed again
// judges it again without reading it (the holder's liveness and the expiry
// are judged now).
[[nodiscard]] LockFacts judge_lock_read(std::string bytes, Time modified, std::chrono::seconds stale_age, Time now);
// Removes the lock at `key` if it is still the one judged; true when removed.
[[nodiscard]] Result<bool> break_lock(Storage& storage, std::string_view key, const LockFacts& judged);

class Lock {
public:
  // Who holds it, when it was not taken.
  struct Held {
    LockFacts facts;
  };
  using TakenOrHeld = std::variant<Lock, Held>;

  // Whether another process may try to take the same key at once.
  // `none`: the key holds a word only this taker chose (a launcher's own
  // place on its roll), so a create that succeeded is the lock at once,
  // without the read-back after kLockSettleMin a storage whose exclusive
  // create is not exact otherwise needs.
  enum class Racers { possible, none };

  // One attempt at the lock `key`; a stale lock is taken over on the way.
  [[nodiscard]] static Result<TakenOrHeld> try_acquire(std::shared_ptr<Storage> storage, std::string key,
                                                       const util::LockHolder& me, LockTimes times, Time now,
                                                       Racers racers = Racers::possible);
  // Where exclusive create is exact, one create: the lock, or nullopt when
  // something is there, neither read nor judged (a stale lock stays; the
  // caller that must break one calls try_acquire). Elsewhere as try_acquire,
  // nullopt when held.
  [[nodiscard]] static Result<std::optional<Lock>> try_create(std::shared_ptr<Storage> storage, std::string key,
                                                              const util::LockHolder& me, LockTimes times, Time now);

  Lock(); // holds nothing
  Lock(Lock&& other) noexcept;
  Lock& operator=(Lock&& other) noexcept;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  ~Lock(); // releases, ignoring errors

  [[nodiscard]] bool held() const;
  [[nodiscard]] LockRecord record() const;
  // Moves the expiry to now + ttl; fails when the lock is no longer ours.
  [[nodiscard]] Status renew(Time now);
  // Whether the lease lapsed by `now`: no renewal went through for its whole
  // time to live (the store was out of reach, or this process stalled), so
  // another process may have judged the lock stale and taken it over.
  [[nodiscard]] bool lease_lapsed(Time now) const;
  // Renews every `period` from a thread of its own until released. A renewal
  // that fails is logged and tried again at the next period. The thread
  // starts with every signal blocked: a caller that waits for its child with
  // SIGCHLD blocked and read from a signalfd (compile/driver.cpp) would
  // otherwise miss the signals the kernel hands to it.
  void keep_renewed(std::chrono::milliseconds period);
  void keep_renewed(); // every third of the time to live
  // Removes the lock if it is still ours; idempotent.
  Status release();

private:
  // On the heap, so that the renewing thread's view survives a move.
  struct State;
  explicit Lock(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace npc::storage
