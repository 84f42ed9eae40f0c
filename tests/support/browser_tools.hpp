// browser_tools: what a headless-browser test (tests/browser, playwright-core
// driving Debian's chromium) needs, and what is missing of it here.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace aqs::test {

// What is missing to run the browser, or "" when all is there: `node` is
// the Node.js found at configure time, `browser_dir` tests/browser.
inline std::string missing_browser_tools(const std::filesystem::path& node, const std::filesystem::path& browser_dir) {
  std::string why;
  const char* chromium = std::getenv("CHROMIUM");
  if (!std::filesystem::exists(chromium != nullptr ? chromium : "/usr/bin/chromium")) {
    why += " chromium (Debian package chromium);";
  }
  if (!std::filesystem::exists(node)) why += " node (Node.js 20 or newer);";
  if (!std::filesystem::exists(browser_dir / "node_modules" / "playwright-core" / "package.json")) {
    why += " playwright-core (npm ci in tests/browser: scripts/setup-deps does it);";
  }
  return why;
}

}  // namespace aqs::test
