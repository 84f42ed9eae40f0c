// hostlist: expanding and compressing Slurm host list expressions.
#include "core/hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <unordered_set>

namespace aqs::core {

namespace {

struct split_name {
  std::string prefix;
  std::string digits;
};

split_name split_host(const std::string& h) {
  std::size_t i = h.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(h[i - 1])) != 0) --i;
  return split_name{h.substr(0, i), h.substr(i)};
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw std::invalid_argument("bad host list '" + std::string(text) + "': " + why);
}

// The values of one bracket's body "01-04,7", as text of their width.
std::vector<std::string> bracket_values(std::string_view whole, std::string_view body) {
  std::vector<std::string> out;
  if (body.empty()) bad(whole, "empty brackets");
  std::size_t pos = 0;
  while (pos <= body.size()) {
    std::size_t comma = body.find(',', pos);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view item = body.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi)) bad(whole, "'" + std::string(item) + "' is not a number or a range of numbers");
    const std::uint64_t a = std::stoull(std::string(lo)), b = std::stoull(std::string(hi));
    if (b < a) bad(whole, "the range '" + std::string(item) + "' runs backwards");
    if (b - a > 65536) bad(whole, "the range '" + std::string(item) + "' is too long");
    for (std::uint64_t v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(std::move(s));
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view text, std::size_t max_hosts) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    // One host expression: up to the next comma outside brackets.
    std::size_t end = pos;
    int depth = 0;
    while (end < text.size() && (depth > 0 || text[end] != ',')) {
      if (text[end] == '[') {
        if (++depth > 1) bad(text, "nested brackets");
      } else if (text[end] == ']') {
        if (--depth < 0) bad(text, "']' without '['");
      }
      ++end;
    }
    if (depth != 0) bad(text, "'[' without ']'");
    const std::string_view expr = text.substr(pos, end - pos);
    if (expr.empty()) bad(text, "an empty host name");
    // Each bracket multiplies the names built so far.
    std::vector<std::string> names{""};
    std::size_t i = 0;
    while (i < expr.size()) {
      const std::size_t open = expr.find('[', i);
      const std::string_view literal = expr.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i);
      for (char c : literal) {
        if (std::isspace(static_cast<unsigned char>(c)) != 0) bad(text, "a blank inside a host name");
      }
      for (auto& n : names) n += literal;
      if (open == std::string_view::npos) break;
      const std::size_t close = expr.find(']', open);
      const auto values = bracket_values(text, expr.substr(open + 1, close - open - 1));
      std::vector<std::string> next;
      if (names.size() * values.size() > max_hosts) bad(text, "more than " + std::to_string(max_hosts) + " hosts");
      for (const auto& n : names) {
        for (const auto& v : values) next.push_back(n + v);
      }
      names = std::move(next);
      i = close + 1;
    }
    for (auto& n : names) {
      if (seen.insert(n).second) out.push_back(std::move(n));
      if (out.size() > max_hosts) bad(text, "more than " + std::to_string(max_hosts) + " hosts");
    }
    pos = end + 1;
  }
  return out;
}

bool host_order(const std::string& a, const std::string& b) {
  const split_name x = split_host(a), y = split_host(b);
  if (x.prefix != y.prefix) return x.prefix < y.prefix;
  if (x.digits.size() > 18 || y.digits.size() > 18 || x.digits.empty() || y.digits.empty()) return x.digits < y.digits;
  const long long p = std::stoll(x.digits), q = std::stoll(y.digits);
  if (p != q) return p < q;
  return x.digits < y.digits;
}

std::string compress_hostlist(const std::vector<std::string>& unsorted) {
  // Runs of hosts with the same prefix and numeric suffixes of the same
  // width, in Slurm's order.
  std::vector<std::string> hosts = unsorted;
  std::stable_sort(hosts.begin(), hosts.end(), host_order);
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::string out;
  std::size_t i = 0;
  while (i < hosts.size()) {
    const split_name first = split_host(hosts[i]);
    if (first.digits.empty() || first.digits.size() > 18) {
      out += (out.empty() ? "" : ",") + hosts[i];
      ++i;
      continue;
    }
    // Gather this prefix's consecutive entries.
    std::vector<std::string> nums{first.digits};
    std::size_t j = i + 1;
    while (j < hosts.size()) {
      const split_name n = split_host(hosts[j]);
      if (n.prefix != first.prefix || n.digits.empty() || n.digits.size() > 18) break;
      nums.push_back(n.digits);
      ++j;
    }
    if (nums.size() == 1) {
      out += (out.empty() ? "" : ",") + hosts[i];
      i = j;
      continue;
    }
    std::string ranges;
    std::size_t k = 0;
    while (k < nums.size()) {
      std::size_t e = k;
      // Zero-padded numbers only run on at their own width.
      auto padded = [](const std::string& d) { return d.size() > 1 && d[0] == '0'; };
      while (e + 1 < nums.size() &&
             (nums[e + 1].size() == nums[e].size() || (!padded(nums[e + 1]) && !padded(nums[e]))) &&
             std::stoll(nums[e + 1]) == std::stoll(nums[e]) + 1) {
        ++e;
      }
      ranges += (ranges.empty() ? "" : ",") + nums[k] + (e > k ? "-" + nums[e] : "");
      k = e + 1;
    }
    out += (out.empty() ? "" : ",") + first.prefix + "[" + ranges + "]";
    i = j;
  }
  return out;
}

}  // namespace aqs::core
