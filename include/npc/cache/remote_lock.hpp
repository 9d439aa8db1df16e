#pragma once
// The lock of one entry of a remote cache (remote.hpp): an object
// model.hlo_module.pb.lock in the entry's folder, holding who took it, a
// token of that taking, and until when it holds. An object store has no
// flock and no process to probe, so a lock is proved alive only by being
// renewed: its holder rewrites the expiry while it compiles (RemoteLockKeeper
// does that from a thread), and a lock past its expiry is stale and may be
// taken over by anyone.
//
// Taking it: a create-only PUT (If-None-Match: *). AWS S3 lets exactly one
// of racing creators win. Servers that ignore the condition (s3rver, some
// S3-compatible stores) let several "win", the last PUT's bytes staying; so
// the lock is read back, and read again after a settle time (twice what
// our own create took, 50 ms to 2 s): only the creator whose token is still
// there keeps it. A racer's PUT that lands later than that can still take a
// lock two creators both believe they hold: a documented best effort, which
// costs one GET and the settle time per lock taken (a compile takes minutes).
// Reading back also settles a create whose response was lost and whose
// retry got 412 for our own object: the token there is ours.
//
// Releasing and renewing look first that the token is still ours, so a
// holder that stalled past its expiry never removes its successor's lock.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <npc/storage/storage.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

// Long enough that a renewal every third of it survives slow requests and
// throttling; short enough that a lock left by a dead node frees its entry
// within minutes.
inline constexpr std::chrono::seconds kRemoteLockTtl{600};
// Bounds of the wait before a taken lock is read again (see above).
inline constexpr std::chrono::milliseconds kRemoteLockSettleMin{50};
inline constexpr std::chrono::milliseconds kRemoteLockSettleMax{2000};

struct RemoteLockRecord {
  std::string owner; // util::LockHolder::serialize() of the taker
  std::string token; // unique to one taking
  std::int64_t expires_unix = 0;

  [[nodiscard]] std::string serialize() const;
  [[nodiscard]] static std::optional<RemoteLockRecord> parse(std::string_view text);
  // "pid 12 on node-3 (neuron_cc_wrapper), since ..., until 12:00:00 UTC"
  [[nodiscard]] std::string describe() const;
  // Unexpired at `now`, and not of a process of this host that is gone:
  // what try_acquire respects.
  [[nodiscard]] bool in_force(std::chrono::system_clock::time_point now) const;
};

class RemoteLock {
public:
  // Who holds it, when it was not taken.
  struct Held {
    std::string holder;
  };
  using TakenOrHeld = std::variant<RemoteLock, Held>;

  // One attempt at the lock of the entry folder `entry_key`: a stale lock
  // (past its expiry, or not a record at all) is removed and taken.
  [[nodiscard]] static Result<TakenOrHeld> try_acquire(std::shared_ptr<storage::Storage> storage, std::string entry_key,
                                                       const util::LockHolder& me, std::chrono::seconds ttl,
                                                       std::chrono::system_clock::time_point now);

  // Whether the entry's lock is held now: a record there, unexpired, and
  // not of a process of this host that is gone (what try_acquire respects).
  [[nodiscard]] static Result<bool> held(const storage::Storage& storage, std::string_view entry_key,
                                         std::chrono::system_clock::time_point now);
  // The entry's lock object: nullopt when there is none; a record that does
  // not parse reads as an empty record (never in force).
  [[nodiscard]] static Result<std::optional<RemoteLockRecord>> read(const storage::Storage& storage,
                                                                   std::string_view entry_key);

  RemoteLock(RemoteLock&&) = default;
  RemoteLock& operator=(RemoteLock&&) = default;
  ~RemoteLock(); // releases, ignoring errors

  [[nodiscard]] const RemoteLockRecord& record() const { return record_; }
  // Moves the expiry to now + ttl; fails when the lock is no longer ours.
  [[nodiscard]] Status renew(std::chrono::system_clock::time_point now);
  // Removes the lock if it is still ours; idempotent.
  [[nodiscard]] Status release();

private:
  RemoteLock(std::shared_ptr<storage::Storage> storage, std::string key, RemoteLockRecord record,
             std::chrono::seconds ttl)
      : storage_(std::move(storage)), key_(std::move(key)), record_(std::move(record)), ttl_(ttl) {}

  std::shared_ptr<storage::Storage> storage_;
  std::string key_; // of the lock object
  RemoteLockRecord record_;
  std::chrono::seconds ttl_{0};
};

// Renews a lock every third of its time to live from a thread of its own,
// until destroyed (which does not release the lock). A renewal that fails is
// logged and tried again at the next period.
class RemoteLockKeeper {
public:
  explicit RemoteLockKeeper(RemoteLock& lock, std::chrono::milliseconds period);
  RemoteLockKeeper(const RemoteLockKeeper&) = delete;
  RemoteLockKeeper& operator=(const RemoteLockKeeper&) = delete;
  ~RemoteLockKeeper();

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace npc::cache
