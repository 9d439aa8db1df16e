#pragma once
// The launchers at work on one shared cache at once, so that they split its
// graphs among themselves without being told how many they are (no
// --world_size, no Slurm step): each keeps a record of its own under
// .npc/launchers/ of the storage every host sees (its name unique to the
// launcher, rewritten from a thread every third of kRollRecordLife while it
// runs, removed at its end), and the roll is the records listed there that
// were rewritten lately: one listing of a few small objects, no reads. A
// launcher that dies drops off the roll within a lifetime, as its locks lapse
// (storage::kLockTtl); one that joins late is seen at the next look.
//
// The split is rendezvous hashing over the roll (share_owner.hpp). Two
// launchers that see different rolls (one joined between their looks) may both
// take a graph: its own lock settles which compiles it. Each launcher starts
// its own share first, costliest first, then helps with the others'.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <npc/launcher/pool_runner.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::launcher {

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
  // Puts this launcher on the roll (a record named after its host and pid,
  // and a random word), removing what dead launchers left there.
  [[nodiscard]] static Result<std::unique_ptr<LauncherRoll>> join(std::shared_ptr<storage::Storage> storage);
  ~LauncherRoll() override; // off the roll
  LauncherRoll(const LauncherRoll&) = delete;
  LauncherRoll& operator=(const LauncherRoll&) = delete;

  [[nodiscard]] const std::string& self() const override { return self_; }
  // The names on the roll now, this launcher's among them, sorted.
  [[nodiscard]] Result<std::vector<std::string>> members(storage::Time now) const;
  // The roll when a look is due (by `now`, the run's clock) and finds it
  // changed; the first call always looks.
  [[nodiscard]] std::optional<std::vector<std::string>> changed(double now) override;

private:
  LauncherRoll(std::shared_ptr<storage::Storage> storage, std::string self);
  void keep_renewed(); // the renewer's loop, until the destructor
  std::shared_ptr<storage::Storage> storage_;
  std::string self_;
  mutable std::mutex io_; // the connection's, shared with the renewer
  std::mutex mutex_;      // leaving_'s
  std::condition_variable stop_;
  bool leaving_ = false;
  std::thread renewer_;
  std::optional<double> first_look_;
  double next_look_ = 0;
  std::vector<std::string> last_;
};

} // namespace npc::launcher
