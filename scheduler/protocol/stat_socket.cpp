#include "protocol/stat_socket.hpp"

#include <cstdint>
#include <cstdio>

namespace aqs::protocol {

std::string stat_socket_name(const std::string& aqsd, const std::string& node) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a: a short, stable name, not a secret
  for (unsigned char c : aqsd) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string(1, '\0') + "aqs-node-stat/" + hex + "/" + node;
}

}  // namespace aqs::protocol
