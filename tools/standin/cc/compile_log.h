// The compiler's progress lines: on stdout like the real compiler, and also
// into --logfile when one is given.
#pragma once

#include <optional>
#include <string>

namespace standin::cc {

class CompileLog {
 public:
  // Throws failure() if the log file cannot be created.
  explicit CompileLog(const std::optional<std::string>& logfile);
  ~CompileLog();
  CompileLog(const CompileLog&) = delete;
  CompileLog& operator=(const CompileLog&) = delete;

  void info(const std::string& line);   // stdout (+ logfile)
  void error(const std::string& line);  // stderr (+ logfile)

 private:
  void to_logfile(const std::string& line);
  int logfile_fd_ = -1;
};

}  // namespace standin::cc
