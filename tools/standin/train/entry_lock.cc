#include "entry_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <thread>

#include "entry_files.h"
#include "error.h"
#include "files.h"

namespace standin::train {
namespace {

constexpr std::chrono::milliseconds kPollInterval{50};

}  // namespace

std::optional<EntryLock> EntryLock::try_acquire(const std::string& path) {
  static constexpr mode_t kFileMode = 0644;
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, kFileMode);
  if (fd < 0) {
    if (errno == EEXIST) return std::nullopt;
    throw failure("cannot create lock '" + path + "': " + errno_text());
  }
  ::close(fd);
  return EntryLock(path);
}

EntryLock::~EntryLock() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

EntryLock::EntryLock(EntryLock&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

void wait_until_gone(const std::string& path, std::chrono::steady_clock::time_point deadline,
                     double timeout_s) {
  while (path_exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream message;
      message << "gave up after " << timeout_s << " s waiting for lock '" << path
              << "' to go away (STANDIN_TRAIN_LOCK_WAIT_S)";
      throw failure(message.str());
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace standin::train
