#pragma once
// A plain aligned text table for human output (scripts use --json).

#include <ostream>
#include <string>
#include <vector>

namespace npc::util {

class Table {
public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  [[nodiscard]] bool empty() const { return rows_.empty(); }
  void print(std::ostream& out) const;

private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

} // namespace npc::util
