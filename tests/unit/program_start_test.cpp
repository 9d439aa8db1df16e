// What neuron_cc_wrapper, started once per graph, does before main: none of
// the start-up work a cache hit once paid for and does not use
// (docs/process-start.md). Read from the program's symbol table, so that a
// change that brings one back fails here, not only in a benchmark.

#include <string>

#include <gtest/gtest.h>

#include "paths.hpp"
#include "process.hpp"

namespace npc {
namespace {

std::string defined_symbols(const std::string& program) {
  auto r = test::run({"nm", "-C", "--defined-only", test::program(program).string()});
  EXPECT_EQ(r.exit_code, 0) << "nm (binutils) is needed: " << r.describe();
  return r.out;
}

TEST(ProgramStart, TheWrapperBuildsNoIostreamsCli11OrCpuProbeAtStart) {
  std::string symbols = defined_symbols("neuron_cc_wrapper");
  // The symbol table is there: an empty one would pass for nothing.
  ASSERT_NE(symbols.find("npc::cli::neuron_cc_wrapper_main"), std::string::npos);
  // <iostream>'s initialiser, which builds the locale and its facets.
  EXPECT_EQ(symbols.find("std::ios_base::Init::Init()"), std::string::npos);
  // CLI11's validators are objects built in every file that includes it.
  EXPECT_EQ(symbols.find("CLI::"), std::string::npos);
  // libcrypto.a's CPU probe, run from .init (util/openssl_cpu.cpp).
  EXPECT_EQ(symbols.find("OPENSSL_cpuid_setup"), std::string::npos);
  EXPECT_EQ(symbols.find("OPENSSL_ia32_cpuid"), std::string::npos);
}

} // namespace
} // namespace npc
