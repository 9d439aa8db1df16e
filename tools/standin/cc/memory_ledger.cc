#include "memory_ledger.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

#include "files.h"
#include "locked_file.h"

namespace standin::cc {
namespace {

constexpr char kLedgerWhat[] = "memory ledger";

struct Entry {
  long pid = 0;
  std::uint64_t bytes = 0;
};

// A zombie still answers kill(pid, 0) but its memory is already freed.
bool is_zombie(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // Format: "pid (comm) state ..."; comm may contain spaces and parentheses.
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

bool is_alive(long pid) {
  if (pid <= 0) return false;
  const bool exists = kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  return exists && !is_zombie(pid);
}

std::vector<Entry> parse(const std::string& text) {
  std::vector<Entry> entries;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    Entry entry;
    if (fields >> entry.pid >> entry.bytes) entries.push_back(entry);
  }
  return entries;
}

std::string render(const std::vector<Entry>& entries) {
  std::string text;
  for (const Entry& entry : entries) {
    text += std::to_string(entry.pid) + " " + std::to_string(entry.bytes) + "\n";
  }
  return text;
}

}  // namespace

MemoryLedger::MemoryLedger(std::string path, std::uint64_t budget_bytes)
    : path_(std::move(path)), budget_bytes_(budget_bytes) {}

MemoryLedger::~MemoryLedger() { release(); }

void MemoryLedger::reserve_or_die(std::uint64_t bytes) {
  bool over_budget = false;
  std::uint64_t others = 0;
  {
    LockedFile ledger(path_, kLedgerWhat);
    std::vector<Entry> live;
    for (const Entry& entry : parse(ledger.read_all())) {
      if (!is_alive(entry.pid)) continue;
      live.push_back(entry);
      others += entry.bytes;
    }
    over_budget = others + bytes > budget_bytes_;
    if (!over_budget) live.push_back({static_cast<long>(getpid()), bytes});
    ledger.replace(render(live));
  }  // the lock is released before dying so the next process is not held up
  if (over_budget) {
    std::ostringstream message;
    message << "neuronx-cc: memory budget exceeded (" << others << " bytes in use + " << bytes
            << " needed > " << budget_bytes_ << "), killed like the OOM killer would\n";
    write_all(STDERR_FILENO, message.str());
    raise(SIGKILL);
  }
  reserved_ = true;
}

void MemoryLedger::release() noexcept {
  if (!reserved_) return;
  reserved_ = false;
  try {
    LockedFile ledger(path_, kLedgerWhat);
    std::vector<Entry> remaining;
    const long self = static_cast<long>(getpid());
    for (const Entry& entry : parse(ledger.read_all())) {
      if (entry.pid != self) remaining.push_back(entry);
    }
    ledger.replace(render(remaining));
  } catch (...) {
    // Leaving the line behind is harmless: the next process drops it once
    // this pid is gone.
  }
}

}  // namespace standin::cc
