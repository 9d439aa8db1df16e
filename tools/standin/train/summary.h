// Per-rank results: printed as one summary line, and saved to a file in the
// shared work directory so the launching process can add them up.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace standin::train {

struct RankSummary {
  long steps = 0;
  long jit_compiles = 0;
  long cache_hits = 0;
  double compile_wait_s = 0;
  std::set<std::string> graph_shas;  // distinct graphs this rank executed
};

// "standin_train: rank <r>/<world>: steps=... graphs=... jit_compiles=...
// cache_hits=... compile_wait_s=x.xxx"
std::string rank_line(const RankSummary& summary, long rank, long world);

// "standin_train: total: ranks=... graphs=<distinct over all ranks>
// jit_compiles=<sum> cache_hits=<sum> compile_wait_s=<max>"
std::string total_line(const std::vector<RankSummary>& ranks);

// Throws failure() on I/O or format errors.
void save_summary(const RankSummary& summary, const std::string& path);
RankSummary load_summary(const std::string& path);

}  // namespace standin::train
