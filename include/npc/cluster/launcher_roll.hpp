#pragma once
// The launchers at work on one shared cache at once, each on a lease of its
// own: the one registry of who is alive, for splitting the graphs among
// them without being told how many they are (no --world_size, no Slurm
// step), and for a Slurm step's task 0 to know which tasks are still at
// work (step_meeting.hpp). Each holds a record under .npc/launchers/ of the
// storage every host sees, a storage::Lock (owner facts and an expiry,
// renewed from a thread every third of its life, kRollRecordLife, and
// removed at its end): a launcher's own name is its host, pid and a random
// word; a task of a Slurm step's is the step's and the task's
// ("slurm-4711.0.task-2"), so that the same task cannot run twice. The roll
// is the records listed there that were rewritten lately: one listing of a
// few small objects, no reads. A launcher that dies drops off the roll
// within a lifetime, as its locks lapse (storage::kLockTtl); one on this
// host is known gone at once by whoever reads its record (judge_lock); one
// that joins late is seen at the next look.
//
// The split is rendezvous hashing over the roll (share_owner.hpp). Two
// launchers that see different rolls (one joined between their looks) may both
// take a graph: its own lock settles which compiles it. Each launcher starts
// its own share first, costliest first, then helps with the others'.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cluster/cluster.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::cluster {

// A roll record's lifetime, the lease of a launcher's place on the roll:
// rewritten every third of it; listed unrenewed for longer (or from a clock
// that far ahead), it is off the roll.
inline constexpr std::chrono::seconds kRollRecordLife{60};
// A record unrenewed this long is a dead launcher's: the next launcher to
// join removes it.
inline constexpr std::chrono::seconds kRollRecordLeftover{600};
// How often the roll is listed: often while launchers that start together
// are still joining, then seldom.
inline constexpr double kRollLookEarlySeconds = 1.0;
inline constexpr double kRollEarlyForSeconds = 10.0;
inline constexpr double kRollLookLaterSeconds = 10.0;
// Where the roll is, under the storage every host sees.
inline constexpr std::string_view kRollFolder = ".npc/launchers";

class LauncherRoll final : public RollLook {
public:
  // Puts this launcher on the roll, removing what dead launchers left
  // there: under `name`, or a name of its own (its host and pid, and a
  // random word). A name another live launcher holds is refused: "<who,
  // else the name> is already running: <its holder>". The lease is renewed over `lease_connection`, from a thread of its
  // own; the roll is listed over `storage`, by the caller's thread.
  [[nodiscard]] static Result<std::unique_ptr<LauncherRoll>> join(std::shared_ptr<storage::Storage> storage,
                                                                  std::shared_ptr<storage::Storage> lease_connection,
                                                                  std::optional<std::string> name = std::nullopt,
                                                                  std::string_view who = {});
  ~LauncherRoll() override = default; // off the roll: its lease released
  LauncherRoll(const LauncherRoll&) = delete;
  LauncherRoll& operator=(const LauncherRoll&) = delete;

  // The key of the record of the launcher named `name`.
  [[nodiscard]] static std::string record_key(const std::string& name);

  [[nodiscard]] const std::string& self() const override { return self_; }
  // The names on the roll now, this launcher's among them, sorted.
  [[nodiscard]] Result<std::vector<std::string>> members(storage::Time now) const;
  // The roll when a look is due (by `now`, the run's clock) and finds it
  // changed; the first call always looks.
  [[nodiscard]] std::optional<std::vector<std::string>> changed(double now) override;

private:
  LauncherRoll(std::shared_ptr<storage::Storage> storage, std::string self, storage::Lock lease);
  std::shared_ptr<storage::Storage> storage_;
  std::string self_;
  storage::Lock lease_;
  std::optional<double> first_look_;
  double next_look_ = 0;
  std::vector<std::string> last_;
};

} // namespace npc::cluster
