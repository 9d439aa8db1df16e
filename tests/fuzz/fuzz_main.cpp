// libFuzzer entry point for one target, chosen at compile time with
// -DNPC_FUZZ_TARGET=<name> (see CMakeLists.txt). Built with clang only.

#include <cstdio>
#include <cstdlib>

#include "fuzz_targets.hpp"

#ifndef NPC_FUZZ_TARGET
#error "define NPC_FUZZ_TARGET"
#endif
#define NPC_STR2(x) #x
#define NPC_STR(x) NPC_STR2(x)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const npc::fuzz::Target* target = npc::fuzz::find_target(NPC_STR(NPC_FUZZ_TARGET));
  if (target == nullptr) std::abort();
  auto violation = target->body(std::string_view(reinterpret_cast<const char*>(data), size));
  if (violation) {
    std::fprintf(stderr, "PROPERTY VIOLATED (%s): %s\n", target->name, violation->c_str());
    std::abort();
  }
  return 0;
}
