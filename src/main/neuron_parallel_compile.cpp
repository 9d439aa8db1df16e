#include <npc/cli/programs.hpp>

int main(int argc, char** argv) { return npc::cli::neuron_parallel_compile_main(argc, argv); }
