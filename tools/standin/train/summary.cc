#include "summary.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "entry_files.h"
#include "error.h"

namespace standin::train {
namespace {

// Enough digits that saving and loading a wait time does not round it.
constexpr int kSecondsPrecision = 17;

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", seconds);
  return buffer;
}

}  // namespace

std::string rank_line(const RankSummary& summary, long rank, long world) {
  return "standin_train: rank " + std::to_string(rank) + "/" + std::to_string(world) +
         ": steps=" + std::to_string(summary.steps) +
         " graphs=" + std::to_string(summary.graph_shas.size()) +
         " jit_compiles=" + std::to_string(summary.jit_compiles) +
         " cache_hits=" + std::to_string(summary.cache_hits) +
         " compile_wait_s=" + seconds_text(summary.compile_wait_s);
}

std::string total_line(const std::vector<RankSummary>& ranks) {
  std::set<std::string> graphs;
  long jit = 0;
  long hits = 0;
  double wait = 0;
  for (const RankSummary& rank : ranks) {
    graphs.insert(rank.graph_shas.begin(), rank.graph_shas.end());
    jit += rank.jit_compiles;
    hits += rank.cache_hits;
    wait = std::max(wait, rank.compile_wait_s);
  }
  return "standin_train: total: ranks=" + std::to_string(ranks.size()) +
         " graphs=" + std::to_string(graphs.size()) + " jit_compiles=" + std::to_string(jit) +
         " cache_hits=" + std::to_string(hits) + " compile_wait_s=" + seconds_text(wait);
}

// Format: "steps N", "jit_compiles N", "cache_hits N", "compile_wait_s X",
// then one "graph <sha>" line per distinct graph. Written whole and renamed
// into place: two runs given the same --workdir (two launchers on one
// machine) then each read a whole summary, never one being rewritten.
void save_summary(const RankSummary& summary, const std::string& path) {
  std::ostringstream out;
  out.precision(kSecondsPrecision);
  out << "steps " << summary.steps << "\n"
      << "jit_compiles " << summary.jit_compiles << "\n"
      << "cache_hits " << summary.cache_hits << "\n"
      << "compile_wait_s " << summary.compile_wait_s << "\n";
  for (const std::string& sha : summary.graph_shas) out << "graph " << sha << "\n";
  publish_file(path, out.str(), IfPresent::kReplace, "rank summary");
}

RankSummary load_summary(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw failure("cannot read rank summary '" + path + "'");
  RankSummary summary;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    bool ok = true;
    if (key == "steps") ok = static_cast<bool>(fields >> summary.steps);
    else if (key == "jit_compiles") ok = static_cast<bool>(fields >> summary.jit_compiles);
    else if (key == "cache_hits") ok = static_cast<bool>(fields >> summary.cache_hits);
    else if (key == "compile_wait_s") ok = static_cast<bool>(fields >> summary.compile_wait_s);
    else if (key == "graph") {
      std::string sha;
      ok = static_cast<bool>(fields >> sha);
      summary.graph_shas.insert(sha);
    } else {
      ok = key.empty();
    }
    if (!ok) throw failure("malformed rank summary '" + path + "': " + line);
  }
  return summary;
}

}  // namespace standin::train
