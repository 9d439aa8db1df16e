#include "neff_check.h"

#include <fstream>

#include "error.h"

namespace standin::train {
namespace {

constexpr char kShaField[] = "graph-sha256: ";
constexpr char kHeaderEnd[] = "end-header";
// The header is a few hundred bytes; stop reading lines well before the
// binary padding could produce a misleading match.
constexpr int kMaxHeaderLines = 64;

}  // namespace

void check_neff(const std::string& neff_path, const std::string& graph_path,
                const std::string& graph_sha256) {
  std::ifstream neff(neff_path, std::ios::binary);
  if (!neff) throw failure("compile of '" + graph_path + "' left no NEFF at '" + neff_path + "'");
  const std::string field(kShaField);
  std::string line;
  for (int i = 0; i < kMaxHeaderLines && std::getline(neff, line) && line != kHeaderEnd; ++i) {
    if (line.compare(0, field.size(), field) != 0) continue;
    const std::string found = line.substr(field.size());
    if (found == graph_sha256) return;
    throw failure("NEFF '" + neff_path + "' was compiled from graph sha256 " + found +
                  ", expected " + graph_sha256 + " of '" + graph_path + "'");
  }
  throw failure("NEFF '" + neff_path + "' has no graph-sha256 header line (graph '" + graph_path + "')");
}

}  // namespace standin::train
