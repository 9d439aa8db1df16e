// launcher/trial: recognising torch-neuronx's graph extraction lines.

#include <string>

#include <gtest/gtest.h>

#include <npc/launcher/trial.hpp>

namespace npc::launcher {
namespace {

std::string line_for(const std::string& path) {
  return "Extracting graphs (" + path + ") for ahead-of-time parallel compilation. No compilation was done.";
}

TEST(ParseExtractionLine, TheExactTorchNeuronxLine) {
  EXPECT_EQ(parse_extraction_line(
                "Extracting graphs (/p/model.hlo_module.pb) for ahead-of-time parallel compilation. "
                "No compilation was done."),
            "/p/model.hlo_module.pb");
}

TEST(ParseExtractionLine, WithALoggingPrefix) {
  EXPECT_EQ(parse_extraction_line("2024-05-01 10:00:00.000: 1234 INFO ||NEURON_CC_WRAPPER||: " +
                                  line_for("/c/neuronxcc-2.0/MODULE_ab+cd/model.hlo_module.pb")),
            "/c/neuronxcc-2.0/MODULE_ab+cd/model.hlo_module.pb");
}

TEST(ParseExtractionLine, PathsWithSpacesAndParentheses) {
  EXPECT_EQ(parse_extraction_line(line_for("/my cache/a b/model.hlo_module.pb")),
            "/my cache/a b/model.hlo_module.pb");
  EXPECT_EQ(parse_extraction_line(line_for("/p/x)y/model.hlo_module.pb")), "/p/x)y/model.hlo_module.pb");
  EXPECT_EQ(parse_extraction_line(line_for("/p/(x)/z) (w/model.hlo_module.pb")),
            "/p/(x)/z) (w/model.hlo_module.pb");
}

TEST(ParseExtractionLine, OtherLinesAreNotIt) {
  for (const char* line : {
           "",
           "Compiling graphs (/p/model.hlo_module.pb) for ahead-of-time parallel compilation.",
           "extracting graphs (/p/model.hlo_module.pb) for ahead-of-time parallel compilation.",
           "Extracting graphs () for ahead-of-time parallel compilation. No compilation was done.",
           "Extracting graphs (/p/model.hlo_module.pb",
           "Extracting graphs",
           "epoch 1 loss 0.25",
       }) {
    EXPECT_EQ(parse_extraction_line(line), "") << "[" << line << "]";
  }
}

} // namespace
} // namespace npc::launcher
