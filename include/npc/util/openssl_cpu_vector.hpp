#pragma once

#include <optional>
#include <string>

namespace npc::util {

// OpenSSL's CPU capability vector for its SHA-256 code, as the value of the
// OPENSSL_ia32cap environment variable (OPENSSL_ia32cap(3): "LEAF1:LEAF7"),
// made from glibc's record of the CPUID leaves, which glibc filled at start.
// Only the bits OpenSSL's SHA-256 chooses its code path by, and only where
// glibc says the feature is usable (the OS saves its registers). nullopt off
// x86-64, or where glibc has no such record (before 2.33): OpenSSL then
// probes the CPU itself.
std::optional<std::string> openssl_cpu_vector();

} // namespace npc::util
