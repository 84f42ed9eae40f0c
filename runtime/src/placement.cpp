// placement: parsing of maps, cpu lists and host runs.
#include "placement.hpp"

#include <charconv>
#include <map>
#include <stdexcept>
#include <string>

#include "core/processor_set.hpp"

namespace aqs::runtime {

namespace {

int parse_int(std::string_view s, const char* what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v < 0) {
    throw std::invalid_argument(std::string("bad ") + what + " '" + std::string(s) + "'");
  }
  return v;
}

template <typename F>
void for_each_item(std::string_view text, F f) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    f(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) f(text);  // a trailing comma: an empty item, which f rejects
  }
}

}  // namespace

std::vector<int> parse_map(std::string_view map) {
  // The one parser of the 0/1 form, the scheduling core's.
  core::processor_set set;
  try {
    set = core::processor_set::from_string(map);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("bad ") + e.what());
  }
  if (set.none()) throw std::invalid_argument("bad processor map: no processor in it");
  std::vector<int> procs;
  procs.reserve(set.count());
  set.for_each([&](std::size_t p) { procs.push_back(static_cast<int>(p)); });
  return procs;
}

std::vector<int> procs_of(const slot& s) {
  std::vector<int> out{s.proc};
  out.insert(out.end(), s.more_procs.begin(), s.more_procs.end());
  return out;
}

std::vector<int> cpus_of(const slot& s) {
  std::vector<int> out{s.cpu};
  out.insert(out.end(), s.more_cpus.begin(), s.more_cpus.end());
  return out;
}

std::string format_map(const std::vector<slot>& slots, std::size_t width) {
  for (const auto& s : slots) {
    for (const int p : procs_of(s)) width = std::max(width, static_cast<std::size_t>(p) + 1);
  }
  std::string map(width, '0');
  for (const auto& s : slots) {
    for (const int p : procs_of(s)) map[static_cast<std::size_t>(p)] = '1';
  }
  return map;
}

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  for_each_item(text, [&](std::string_view item) { out.push_back(parse_int(item, "cpu")); });
  return out;
}

std::vector<std::string> parse_host_runs(std::string_view text) {
  std::vector<std::string> out;
  for_each_item(text, [&](std::string_view item) {
    const auto star = item.find('*');
    const std::string_view host = item.substr(0, star);
    if (host.empty()) throw std::invalid_argument("bad host list entry '" + std::string(item) + "'");
    const int n = star == std::string_view::npos ? 1 : parse_int(item.substr(star + 1), "host count");
    if (n < 1 || n > (1 << 20)) throw std::invalid_argument("bad host count in '" + std::string(item) + "'");
    out.insert(out.end(), static_cast<std::size_t>(n), std::string(host));
  });
  return out;
}

std::vector<slot> make_slots(const std::vector<int>& procs, const std::vector<int>& cpus,
                             const std::vector<std::string>& hosts, const std::string& default_host, int ncpus) {
  if (!cpus.empty() && cpus.size() != procs.size()) {
    throw std::invalid_argument("the cpu list has " + std::to_string(cpus.size()) + " entries for " +
                                std::to_string(procs.size()) + " processors");
  }
  if (!hosts.empty() && hosts.size() != procs.size()) {
    throw std::invalid_argument("the host list has " + std::to_string(hosts.size()) + " entries for " +
                                std::to_string(procs.size()) + " processors");
  }
  std::vector<slot> out;
  out.reserve(procs.size());
  for (std::size_t i = 0; i < procs.size(); ++i) {
    slot s;
    s.proc = procs[i];
    s.cpu = cpus.empty() ? procs[i] % std::max(ncpus, 1) : cpus[i];
    s.host = hosts.empty() ? default_host : hosts[i];
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<slot> group_ranks(const std::vector<slot>& procs, int per_rank) {
  if (per_rank < 1) throw std::invalid_argument("bad processors per rank " + std::to_string(per_rank));
  if (per_rank == 1) return procs;
  std::vector<slot> out;
  std::map<std::string, std::size_t> open;  // host -> its rank still being filled
  for (const auto& p : procs) {
    const auto it = open.find(p.host);
    if (it == open.end()) {
      slot r = p;
      r.more_procs.clear();
      r.more_cpus.clear();
      open.emplace(p.host, out.size());
      out.push_back(std::move(r));
    } else {
      slot& r = out[it->second];
      r.more_procs.push_back(p.proc);
      r.more_cpus.push_back(p.cpu);
    }
    // Full: the host's next processor opens its next rank.
    const slot& r = out[open.at(p.host)];
    if (r.more_procs.size() + 1 == static_cast<std::size_t>(per_rank)) open.erase(p.host);
  }
  if (!open.empty()) {
    const std::string& host = open.begin()->first;
    std::size_t n = 0;
    for (const auto& p : procs) n += p.host == host ? 1 : 0;
    throw std::invalid_argument("the map has " + std::to_string(n) + " processors on host " + host +
                                ", not a multiple of the job's " + std::to_string(per_rank) + " processors per rank");
  }
  return out;
}

int parse_cpus_per_task(const char* text) {
  if (text == nullptr || *text == '\0') return 1;
  const int n = parse_int(text, "AQS_CPUS_PER_TASK");
  if (n < 1) throw std::invalid_argument("bad AQS_CPUS_PER_TASK '" + std::string(text) + "'");
  return n;
}

}  // namespace aqs::runtime
