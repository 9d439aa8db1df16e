// OpenSSL's CPU capability vector for the digests of util/sha256.cpp, filled
// from what glibc found at start instead of by OpenSSL's own probe.
//
// libcrypto.a's x86_64cpuid.o puts a call to OPENSSL_cpuid_setup into the
// program's .init section: every start of the program, a cache hit included,
// ran a dozen CPUID instructions, each a trap to the hypervisor in a virtual
// machine (about 6 us here), before main. Defining the two symbols the
// digests need from those objects, OPENSSL_ia32cap_P and OPENSSL_cleanse,
// keeps the linker from pulling them in; the vector is filled on the first
// digest from glibc's record of the CPUID leaves (<sys/platform/x86.h>),
// with only the bits OpenSSL's SHA-256 code chooses its path by, and only
// where glibc says the feature is usable (the OS saves its registers). The
// bit layout is OpenSSL's documented one (OPENSSL_ia32cap(3)); a libcrypto.a
// that needed more of those objects would fail the link on a duplicate
// symbol, not run with a wrong vector.

#include <npc/util/openssl_cpu.hpp>

#if defined(__x86_64__) && __has_include(<sys/platform/x86.h>)

#include <cstddef>
#include <cstring>
// glibc 2.36's header spells bool as C's _Bool, which clang's C++ rejects.
#if defined(__clang__)
#define _Bool bool
#endif
#include <sys/platform/x86.h>
#if defined(__clang__)
#undef _Bool
#endif

extern "C" {
// Read by OpenSSL's assembly: [0] CPUID.1:EDX (bit 30 "Intel CPU"),
// [1] CPUID.1:ECX, [2] CPUID.7.0:EBX, [3] CPUID.7.0:ECX.
unsigned int OPENSSL_ia32cap_P[4];

void OPENSSL_cleanse(void* ptr, std::size_t length) { ::explicit_bzero(ptr, length); }
}

namespace npc::util {

void prepare_openssl_cpu() {
  static const bool prepared = [] {
    unsigned int leaf1_ecx = 0;
    unsigned int leaf7_ebx = 0;
    if (CPU_FEATURE_ACTIVE(SSSE3)) leaf1_ecx |= 1u << 9;
    if (CPU_FEATURE_ACTIVE(AVX)) leaf1_ecx |= 1u << 28;
    if (CPU_FEATURE_ACTIVE(BMI1)) leaf7_ebx |= 1u << 3;
    if (CPU_FEATURE_ACTIVE(AVX2)) leaf7_ebx |= 1u << 5;
    if (CPU_FEATURE_ACTIVE(BMI2)) leaf7_ebx |= 1u << 8;
    if (CPU_FEATURE_ACTIVE(SHA)) leaf7_ebx |= 1u << 29;
    OPENSSL_ia32cap_P[1] = leaf1_ecx;
    OPENSSL_ia32cap_P[2] = leaf7_ebx;
    return true;
  }();
  (void)prepared;
}

} // namespace npc::util

#else

namespace npc::util {

void prepare_openssl_cpu() {} // OpenSSL's own start-up probe is kept

} // namespace npc::util

#endif
