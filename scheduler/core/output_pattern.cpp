// output_pattern: %j/%x/%u expansion of output file names.
#include "core/output_pattern.hpp"

#include <algorithm>

namespace aqs::core {

std::string expand_output_pattern(std::string_view pattern, const pattern_values& values) {
  std::string out;
  out.reserve(pattern.size() + 16);
  std::size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c != '%') {
      out.push_back(c);
      ++i;
      continue;
    }
    // %[width]letter
    std::size_t k = i + 1;
    std::size_t width = 0;
    while (k < pattern.size() && pattern[k] >= '0' && pattern[k] <= '9') {
      width = std::min<std::size_t>(width * 10 + static_cast<std::size_t>(pattern[k] - '0'), 64);
      ++k;
    }
    if (k >= pattern.size()) {  // trailing "%" or "%12": literal
      out.append(pattern.substr(i));
      break;
    }
    std::string value;
    switch (pattern[k]) {
      case 'j':
      case 'J': value = std::to_string(values.job_id); break;
      case 'N': value = std::string(values.node); break;
      case 'A': value = std::to_string(values.array_job_id != 0 ? values.array_job_id : values.job_id); break;
      case 'a': value = values.array_task_id >= 0 ? std::to_string(values.array_task_id) : "4294967294"; break;
      case 'x': value = std::string(values.job_name); break;
      case 'u': value = std::string(values.user); break;
      case '%':
        if (k == i + 1) {
          out.push_back('%');
          i = k + 1;
          continue;
        }
        [[fallthrough]];
      default:
        out.append(pattern.substr(i, k + 1 - i));
        i = k + 1;
        continue;
    }
    if (value.size() < width) out.append(width - value.size(), '0');
    out.append(value);
    i = k + 1;
  }
  return out;
}

}  // namespace aqs::core
