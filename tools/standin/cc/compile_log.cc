#include "compile_log.h"

#include <fcntl.h>
#include <unistd.h>

#include "error.h"
#include "files.h"

namespace standin::cc {

CompileLog::CompileLog(const std::optional<std::string>& logfile) {
  if (!logfile) return;
  static constexpr mode_t kFileMode = 0644;
  logfile_fd_ = ::open(logfile->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
  if (logfile_fd_ < 0) throw failure("cannot create log file '" + *logfile + "': " + errno_text());
}

CompileLog::~CompileLog() {
  if (logfile_fd_ >= 0) ::close(logfile_fd_);
}

void CompileLog::to_logfile(const std::string& line) {
  if (logfile_fd_ >= 0) write_all(logfile_fd_, line + "\n");
}

// Each line goes out in one write so a crash right after it still shows it
// and concurrent compilers sharing a terminal do not interleave mid-line.
void CompileLog::info(const std::string& line) {
  write_all(STDOUT_FILENO, line + "\n");
  to_logfile(line);
}

void CompileLog::error(const std::string& line) {
  write_all(STDERR_FILENO, line + "\n");
  to_logfile(line);
}

}  // namespace standin::cc
