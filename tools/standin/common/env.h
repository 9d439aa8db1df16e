// Reading the stand-ins' settings from environment variables. Malformed
// values are configuration mistakes and throw a usage error (exit 2) naming
// the variable, rather than being silently replaced by a default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace standin {

// The variable's value, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// True for 1/true/yes/on (any case); false when unset, empty or anything else.
bool env_truthy(const char* name);

// Non-negative integer; `fallback` when unset.
std::uint64_t env_u64(const char* name, std::uint64_t fallback);

// Non-negative real number; `fallback` when unset.
double env_double(const char* name, double fallback);

// Byte count with an optional K/M/G suffix (powers of 1024); nullopt when unset.
std::optional<std::uint64_t> env_bytes(const char* name);

// Parsers behind the env_* readers, also used for command-line values and
// numbers embedded in graph text. `what` names the value in error messages.
std::uint64_t parse_u64(const std::string& text, const std::string& what);
std::uint64_t parse_bytes(const std::string& text, const std::string& what);

}  // namespace standin
