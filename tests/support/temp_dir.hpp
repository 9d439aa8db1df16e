#pragma once
// A fresh temp directory per test: removed after a pass, kept (and named on
// stderr) after a failure, for a look.

#include <filesystem>

#include <gtest/gtest.h>

namespace npc::test {

namespace fs = std::filesystem;

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;
  // <TMPDIR>/npc-tests/<suite>.<test>.XXXXXX
  [[nodiscard]] const fs::path& dir() const { return dir_; }

private:
  fs::path dir_;
};

} // namespace npc::test
