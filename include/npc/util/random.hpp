#pragma once
// Random numbers for temporary names and back-off jitter, from the kernel's
// getrandom(2). No generator is kept: std::random_device asks the CPU
// whether it has RDRAND (CPUID, a trap to the hypervisor in a virtual
// machine) and a Mersenne twister is 5 KB of state per thread, both paid
// by every cache hit that names one temporary file.

#include <cstdint>

namespace npc::util {

[[nodiscard]] std::uint64_t random_u64();

// SplitMix64's finaliser: 64 bits in, 64 well-spread bits out (the same
// input gives the same output, in every process).
[[nodiscard]] std::uint64_t mix64(std::uint64_t x);

// Uniform enough in [low, high] for jitter and names (the bias of a modulo
// of 2^64 is below 2^-40 for the ranges used); low when high <= low.
[[nodiscard]] std::int64_t random_between(std::int64_t low, std::int64_t high);

} // namespace npc::util
