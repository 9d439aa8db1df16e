#pragma once
// Time behind an interface, so eviction order, TTLs, backoff and the
// progress display can be tested with a fake clock.

#include <chrono>
#include <ctime>

namespace npc::util {

using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

// A file time from stat(2).
[[nodiscard]] inline WallTime wall_time(const struct timespec& ts) {
  using namespace std::chrono;
  return WallTime(duration_cast<WallTime::duration>(seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec)));
}

class Clock {
public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual WallTime now() const = 0;
};

class SystemClock final : public Clock {
public:
  [[nodiscard]] WallTime now() const override { return std::chrono::system_clock::now(); }
  static const SystemClock& instance() {
    static const SystemClock clock;
    return clock;
  }
};

class FakeClock final : public Clock {
public:
  explicit FakeClock(WallTime start) : now_(start) {}
  [[nodiscard]] WallTime now() const override { return now_; }
  void advance(std::chrono::system_clock::duration by) { now_ += by; }
  void set(WallTime when) { now_ = when; }

private:
  WallTime now_;
};

// Seconds on a monotonic clock, for measuring durations.
[[nodiscard]] inline double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

} // namespace npc::util
