// unix_user: getpwuid_r with a buffer large enough for any entry.
#include "daemon_base/unix_user.hpp"

#include <pwd.h>
#include <unistd.h>
#include <vector>

namespace aqs::daemon {

std::string user_name_of(std::int64_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

}  // namespace aqs::daemon
