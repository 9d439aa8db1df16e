// Simulated OOM killer: compiler processes sharing a memory budget record
// their reservations in a ledger file. One that would push the total of the
// live reservations over the budget kills itself with SIGKILL, which is what
// the parent of a real compiler sees when the kernel's OOM killer strikes.
#pragma once

#include <cstdint>
#include <string>

namespace standin::cc {

class MemoryLedger {
 public:
  MemoryLedger(std::string path, std::uint64_t budget_bytes);
  ~MemoryLedger();  // removes this process's line if it reserved one
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // Drops the lines of dead processes, then appends "<pid> <bytes>" if the
  // live total plus `bytes` fits the budget; otherwise raises SIGKILL.
  void reserve_or_die(std::uint64_t bytes);

 private:
  void release() noexcept;

  std::string path_;
  std::uint64_t budget_bytes_;
  bool reserved_ = false;
};

}  // namespace standin::cc
