// The name of a graph's cache entry, as current torch-neuronx forms it:
//   <root>/neuronxcc-<compiler version>/MODULE_<graph part>+<flags part>/
//
// Graph part: torch-xla hashes the traced graph into a 64-bit number and
// prints it in decimal. The stand-in has no torch-xla; it stands in the
// first 8 bytes of SHA-256(graph bytes), read big-endian, printed in
// decimal: the same shape of name, but not the same number torch-xla
// would give. (NxD / optimum-neuron pass a 20-hex-digit part instead; the
// stand-in does not play those.)
//
// Flags part: the first 8 hex digits of the MD5 of the compiler flags
// joined by single spaces ("d41d8cd9" when there are none).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace standin::train {

std::uint64_t graph_hash(std::string_view graph_bytes);
std::string flags_hash(const std::vector<std::string>& compiler_flags);

// "<root>/neuronxcc-<version>/MODULE_<graph_hash>+<flags_hash>"
std::string entry_directory(const std::string& root, const std::string& compiler_version,
                            std::string_view graph_bytes, const std::vector<std::string>& compiler_flags);

}  // namespace standin::train
