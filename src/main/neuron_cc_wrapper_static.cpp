// neuron_cc_wrapper as torch-neuronx starts it, once per graph: linked
// -static-pie (src/CMakeLists.txt), so that no dynamic loader maps libc and
// binds its symbols at every start, while the program keeps its address
// randomisation. It links curl_loader/refused.cpp as its libcurl loader:
// S3 is its dynamic build's, NPC_WRAPPER_S3_BUILD, which it executes first.

#include <cstdio>
#include <cstdlib>

#include <npc/cli/programs.hpp>

int main(int argc, char** argv) {
  const int status = npc::cli::neuron_cc_wrapper_main(argc, argv, NPC_WRAPPER_S3_BUILD);
  // Everything the program made is gone by now but the static objects (the
  // logging registry, its loggers and formatters), whose destruction frees
  // memory the kernel takes back anyway: about 15 us of a hit that takes
  // under 1 ms (docs/process-start.md). Output is flushed as exit() would;
  // locks are files the program removed, or flocks the kernel lets go.
  std::fflush(nullptr);
  std::_Exit(status);
}
