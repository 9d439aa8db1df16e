#include <npc/util/openssl_cpu_vector.hpp>

#include <cstdio>

#if defined(__x86_64__) && __has_include(<sys/platform/x86.h>)
#define NPC_HAVE_GLIBC_CPU_RECORD 1
// glibc 2.36's header spells bool as C's _Bool, which clang's C++ rejects.
#if defined(__clang__)
#define _Bool bool
#endif
#include <sys/platform/x86.h>
#if defined(__clang__)
#undef _Bool
#endif
// glibc 2.33 named the test CPU_FEATURE_USABLE; 2.34 renamed it.
#if !defined(CPU_FEATURE_ACTIVE) && defined(CPU_FEATURE_USABLE)
#define CPU_FEATURE_ACTIVE(name) CPU_FEATURE_USABLE(name)
#endif
#if !defined(CPU_FEATURE_ACTIVE)
#undef NPC_HAVE_GLIBC_CPU_RECORD
#endif
#endif

namespace npc::util {

#if defined(NPC_HAVE_GLIBC_CPU_RECORD)

std::optional<std::string> openssl_cpu_vector() {
  // The words OpenSSL's sha256-x86_64 assembly tests: CPUID.1:ECX (SSSE3
  // bit 9, AVX bit 28) and CPUID.7.0:EBX (BMI1 bit 3, AVX2 bit 5, BMI2 bit
  // 8, SHA bit 29). No "Intel CPU" bit (CPUID.1:EDX bit 30): a CPU with AVX
  // but neither AVX2 nor SHA (Intel's of 2011-2012) takes the SSSE3 path.
  unsigned long long leaf1_ecx = 0;
  unsigned long long leaf7_ebx = 0;
  if (CPU_FEATURE_ACTIVE(SSSE3)) leaf1_ecx |= 1ull << 9;
  if (CPU_FEATURE_ACTIVE(AVX)) leaf1_ecx |= 1ull << 28;
  if (CPU_FEATURE_ACTIVE(BMI1)) leaf7_ebx |= 1ull << 3;
  if (CPU_FEATURE_ACTIVE(AVX2)) leaf7_ebx |= 1ull << 5;
  if (CPU_FEATURE_ACTIVE(BMI2)) leaf7_ebx |= 1ull << 8;
  if (CPU_FEATURE_ACTIVE(SHA)) leaf7_ebx |= 1ull << 29;
  // The first word's high half is CPUID.1:ECX, the second's low half
  // CPUID.7.0:EBX; each word is read with C's base prefixes.
  char value[64];
  std::snprintf(value, sizeof value, "0x%llx:0x%llx", leaf1_ecx << 32, leaf7_ebx);
  return std::string(value);
}

#else

std::optional<std::string> openssl_cpu_vector() { return std::nullopt; }

#endif

} // namespace npc::util
