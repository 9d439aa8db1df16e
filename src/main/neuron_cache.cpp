#include <npc/cli/programs.hpp>

int main(int argc, char** argv) { return npc::cli::neuron_cache_main(argc, argv); }
