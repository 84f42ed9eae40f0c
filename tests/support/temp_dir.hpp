// temp_dir: a directory of a test's own under $TMPDIR, removed with all it
// holds when the guard goes, also when the test fails.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <sys/stat.h>

namespace aqs::test {

class temp_dir {
public:
  // `mode` 0777 lets jobs running as other users write there.
  explicit temp_dir(const std::string& prefix = "aqs-test", mode_t mode = 0700) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
    ::chmod(path_.c_str(), mode);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

}  // namespace aqs::test
