#include "temp_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace npc::test {

void TempDirTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  fs::path base = fs::temp_directory_path() / "npc-tests";
  fs::create_directories(base);
  std::string pattern = (base / (name + ".XXXXXX")).string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern << ": " << std::strerror(errno);
  dir_ = pattern;
}

void TempDirTest::TearDown() {
  if (dir_.empty()) return;
  if (HasFailure()) {
    std::cerr << "test files kept in " << dir_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

} // namespace npc::test
