#include <npc/util/temp_cleanup.hpp>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>

namespace npc::util {

namespace {

// A process writes a handful of temps at once (an output, its staging
// folder, a few cache files per worker thread); a slot costs PATH_MAX bytes.
constexpr int kSlots = 64;
// Folders nest this deep at most in what we remove on a signal (a compile's
// work folder); deeper parts stay, as after SIGKILL.
constexpr int kMaxDepth = 24;

enum SlotState : int { kFree = 0, kFilling = 1, kArmed = 2 };

// Zero-initialized at compile time (kFree is 0), so they cost a process
// nothing at start: no initializer runs, and their pages are touched only
// when a slot is used. (A struct with a default member initializer here made
// g++ emit a start-up loop over all of them: 64 page faults per process,
// about 7% of a cache hit.)
std::atomic<int> g_slot_state[kSlots];
char g_slot_path[kSlots][PATH_MAX];

constexpr int kWatchedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Removes what is at `name` under `dirfd`: a file, or a folder with all in
// it. True when something was removed.
bool remove_signal_safely_at(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0) return true;
  if (errno != EISDIR || depth >= kMaxDepth) return false;
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  alignas(8) char buffer[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
    if (n <= 0) break;
    bool removed_any = false;
    for (long offset = 0; offset < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buffer + offset + 16, sizeof reclen);
      const char* entry = buffer + offset + 19;
      if (std::strcmp(entry, ".") != 0 && std::strcmp(entry, "..") != 0)
        removed_any = remove_signal_safely_at(fd, entry, depth + 1) || removed_any;
      offset += reclen;
    }
    // Removing while reading may skip names: read from the start again
    // while that makes progress (what cannot be removed stops it).
    if (removed_any) ::lseek(fd, 0, SEEK_SET);
  }
  ::close(fd);
  return ::unlinkat(dirfd, name, AT_REMOVEDIR) == 0;
}

extern "C" void remove_temps_and_die(int signal) {
  int saved_errno = errno;
  for (int i = 0; i < kSlots; ++i)
    if (g_slot_state[i].load(std::memory_order_acquire) == kArmed) remove_signal_safely_at(AT_FDCWD, g_slot_path[i], 0);
  errno = saved_errno;
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  ::raise(signal);
}

void install_handlers() {
  for (int signal : kWatchedSignals) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;
    // Ignored (nohup) or someone's own handler: left as it is.
    if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) continue;
    struct sigaction ours {};
    ours.sa_handler = remove_temps_and_die;
    sigemptyset(&ours.sa_mask);
    for (int other : kWatchedSignals) sigaddset(&ours.sa_mask, other);
    ours.sa_flags = SA_RESETHAND;
    ::sigaction(signal, &ours, nullptr);
  }
}

} // namespace

TempCleanup::TempCleanup(const std::filesystem::path& path) {
  static std::once_flag installed;
  std::call_once(installed, install_handlers);
  std::string absolute = path.is_absolute() ? path.string() : std::filesystem::absolute(path).string();
  if (absolute.size() >= PATH_MAX) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slot_state[i].compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) continue;
    std::memcpy(g_slot_path[i], absolute.c_str(), absolute.size() + 1);
    g_slot_state[i].store(kArmed, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TempCleanup::~TempCleanup() { release(); }

TempCleanup& TempCleanup::operator=(TempCleanup&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

void TempCleanup::release() {
  if (slot_ < 0) return;
  g_slot_state[slot_].store(kFree, std::memory_order_release);
  slot_ = -1;
}

} // namespace npc::util
