// run_users: the unprivileged users an integration test program makes for
// its run (through cluster::user), removed when the program exits.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <pwd.h>
#include <string>
#include <vector>

namespace aqs::test {

// Names given to ensure() that did not exist yet are removed with userdel
// at exit (after doctest: plain calls only); users that existed before the
// run are left alone.
struct run_users {
  std::vector<std::string> made;
  run_users() = default;
  run_users(const run_users&) = delete;
  run_users& operator=(const run_users&) = delete;
  ~run_users() {
    for (const auto& name : made) {
      if (::getpwnam(name.c_str()) == nullptr) continue;  // never made (the test stopped first)
      const std::string cmd = "/usr/sbin/userdel " + name + " >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove test user %s\n", name.c_str());
    }
  }
  // Call before cluster::user(name), which creates it.
  void ensure(const std::string& name) {
    if (::getpwnam(name.c_str()) != nullptr) return;
    made.push_back(name);
  }
};

// The program's one list.
inline run_users& users() {
  static run_users u;
  return u;
}

}  // namespace aqs::test
