#include <npc/util/random.hpp>

#include <atomic>
#include <ctime>
#include <sys/random.h>
#include <unistd.h>

namespace npc::util {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// Only when getrandom fails (a seccomp filter, or early boot with
// GRND_NONBLOCK): names stay distinct by process, time and call.
std::uint64_t fallback() {
  static std::atomic<std::uint64_t> calls{0};
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return mix64(static_cast<std::uint64_t>(now.tv_nsec) ^ (static_cast<std::uint64_t>(now.tv_sec) << 30) ^
             (static_cast<std::uint64_t>(::getpid()) << 40) ^ mix64(calls.fetch_add(1, std::memory_order_relaxed)));
}

} // namespace

std::uint64_t random_u64() {
  std::uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof value)) return value;
  return fallback();
}

std::int64_t random_between(std::int64_t low, std::int64_t high) {
  if (high <= low) return low;
  auto span = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low) + 1;
  if (span == 0) return static_cast<std::int64_t>(random_u64()); // the whole range
  return low + static_cast<std::int64_t>(random_u64() % span);
}

} // namespace npc::util
