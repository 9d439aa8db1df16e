// OpenSSL's CPU probe, kept from running at every start of the static
// wrapper (docs/process-start.md, sixth step).
//
// libcrypto.a's x86_64cpuid.o puts a call to OPENSSL_cpuid_setup into the
// program's .init section, so every start of the wrapper, a cache hit
// included, ran about eight CPUID instructions before main: each a trap to
// the hypervisor in a virtual machine (about 5 us here), some 30 us of a
// hit that takes under 1 ms. OPENSSL_cpuid_setup skips its probe when
// OPENSSL_ia32cap gives the vector in full (OPENSSL_ia32cap(3)), and glibc
// has already asked the CPU the same questions. So, before .init, the
// program's environment is for a moment a one-variable list holding the
// vector made from glibc's record (util/openssl_cpu_vector); the first
// constructor puts the real environment back, untouched, before anything
// else reads it. OpenSSL's own symbols are not touched: an OpenSSL that
// ignored the variable would probe as before. A user's own OPENSSL_ia32cap
// (a mask, say) is left to OpenSSL, as is a setuid start, where OpenSSL
// reads no environment.

#include <npc/util/openssl_cpu_vector.hpp>

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace {

char** real_environment = nullptr;
char vector_assignment[96];
char* environment_for_openssl[] = {vector_assignment, nullptr};

void before_init(int, char**, char**) {
  if (std::getenv("OPENSSL_ia32cap") != nullptr) return;
  auto vector = npc::util::openssl_cpu_vector();
  static constexpr char kName[] = "OPENSSL_ia32cap=";
  if (!vector || sizeof kName + vector->size() > sizeof vector_assignment) return;
  std::memcpy(vector_assignment, kName, sizeof kName - 1);
  std::memcpy(vector_assignment + sizeof kName - 1, vector->c_str(), vector->size() + 1);
  real_environment = environ;
  environ = environment_for_openssl;
}

// .preinit_array runs before .init, and .init before the constructors.
__attribute__((section(".preinit_array"), used)) void (*const run_before_init)(int, char**, char**) = before_init;

// The first priority a program may use: before every other constructor.
__attribute__((constructor(101))) void after_init() {
  if (real_environment != nullptr) environ = real_environment;
}

} // namespace
