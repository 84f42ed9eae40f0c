// unix_user: a uid's user name, as both daemons show it (from the passwd database).
#pragma once

#include <cstdint>
#include <string>

namespace aqs::daemon {

// The user name of a uid, or its number as text when it has no passwd entry.
std::string user_name_of(std::int64_t uid);

}  // namespace aqs::daemon
