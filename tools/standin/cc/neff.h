// The stand-in NEFF: a readable header saying which graph was compiled with
// which flags by which compiler version, then deterministic padding so its
// size grows with the graph like a real NEFF's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace standin::cc {

inline constexpr char kNeffMagic[] = "STANDIN-NEFF 1";
inline constexpr std::uint64_t kMinNeffBytes = 256;

struct NeffHeader {
  std::string compiler_version;
  std::string graph_sha256;
  std::uint64_t graph_bytes = 0;
  std::vector<std::string> flag_words;
  std::string target;
};

// The header text, ending with "end-header\n".
std::string render_header(const NeffHeader& header);

// Header plus padding: max(kMinNeffBytes, graph_bytes / 2) bytes in total,
// or the header alone when it is longer than that. The same header always
// gives the same bytes.
std::string build_neff(const NeffHeader& header);

}  // namespace standin::cc
