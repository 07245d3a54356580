#pragma once
// Test support: a fresh directory under the system temp dir, named after the running test (and
// the process, and a counter, so fixtures and parallel test processes never share one), removed
// with everything in it at scope exit. Header-only so any test folder can use it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace parlab::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "parlab") {
    static std::atomic<int> counter{0};
    std::string name = prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      name += std::string("-") + info->test_suite_name() + "-" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';  // parameterised test names
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace parlab::testing
