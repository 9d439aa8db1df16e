#pragma once
// What the launcher asks of the machine: cores, available memory, where our
// sibling programs are.

#include <cstdint>
#include <filesystem>
#include <string>

namespace npc::launcher {

[[nodiscard]] unsigned core_count();
// MemAvailable from /proc/meminfo, in bytes (0 when unknown).
[[nodiscard]] std::uint64_t available_memory();
// MemTotal, in bytes (0 when unknown).
[[nodiscard]] std::uint64_t total_memory();
// A program installed next to this executable, else found on PATH.
[[nodiscard]] std::filesystem::path sibling_program(const std::string& name);

} // namespace npc::launcher
