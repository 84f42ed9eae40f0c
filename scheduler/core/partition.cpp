// partition: the aqs.conf reader and the submission checks of a partition.
#include "core/partition.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/hostlist.hpp"
#include "core/strategy.hpp"

namespace aqs::core {

std::string_view to_string(partition_state s) noexcept {
  switch (s) {
    case partition_state::up: return "UP";
    case partition_state::drain: return "DRAIN";
    case partition_state::down: return "DOWN";
    case partition_state::inactive: return "INACTIVE";
  }
  return "?";
}

bool partition::has_node(const std::string& name) const {
  return all_nodes || std::find(nodes.begin(), nodes.end(), name) != nodes.end();
}

const partition& site_config::default_partition() const {
  for (const auto& p : partitions) {
    if (p.is_default) return p;
  }
  return partitions.front();
}

const partition* site_config::find(std::string_view name) const {
  for (const auto& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string site_config::names() const {
  std::string out;
  for (const auto& p : partitions) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

site_config implicit_config() {
  site_config c;
  partition p;
  p.name = std::string(k_implicit_partition);
  p.all_nodes = true;
  p.is_default = true;
  c.partitions.push_back(std::move(p));
  return c;
}

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool digits(std::string_view s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t e = s.find(sep, pos);
    if (e == std::string_view::npos) e = s.size();
    out.emplace_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

std::optional<std::int64_t> parse_duration(std::string_view text) {
  const std::string u = upper(text);
  if (u == "UNLIMITED" || u == "INFINITE") return 0;
  std::int64_t days = 0;
  std::string_view rest = text;
  const std::size_t dash = rest.find('-');
  const bool has_days = dash != std::string_view::npos;
  if (has_days) {
    if (!digits(rest.substr(0, dash))) return std::nullopt;
    days = std::stoll(std::string(rest.substr(0, dash)));
    rest = rest.substr(dash + 1);
  }
  const auto f = split(rest, ':');
  if (f.size() > 3) return std::nullopt;
  std::vector<std::int64_t> v;
  for (const auto& x : f) {
    if (!digits(x)) return std::nullopt;
    v.push_back(std::stoll(x));
  }
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i] >= 60) return std::nullopt;
  }
  std::int64_t s = 0;
  if (has_days) {
    // D-H, D-H:M, D-H:M:S
    if (v[0] >= 24) return std::nullopt;
    s = v[0] * 3600 + (v.size() > 1 ? v[1] * 60 : 0) + (v.size() > 2 ? v[2] : 0);
  } else if (v.size() == 1) {
    s = v[0] * 60;  // minutes
  } else if (v.size() == 2) {
    s = v[0] * 60 + v[1];  // minutes:seconds
  } else {
    s = v[0] * 3600 + v[1] * 60 + v[2];
  }
  return days * 86400 + s;
}

std::string format_partition_time(std::int64_t seconds) {
  if (seconds <= 0) return "infinite";
  const std::int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60;
  auto two = [](std::int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  if (d > 0) return std::to_string(d) + "-" + two(h) + ":" + two(m) + ":" + two(s);
  if (h > 0) return std::to_string(h) + ":" + two(m) + ":" + two(s);
  return std::to_string(m) + ":" + two(s);
}

site_config parse_config(std::string_view text, std::string_view file) {
  site_config out;
  out.configured = true;
  partition defaults;  // PartitionName=DEFAULT
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      throw config_error(std::string(file) + ":" + std::to_string(line_no) + ": " + why);
    };
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    // Words separated by blanks, each KEY=VALUE.
    struct word {
      std::string key;      // upper case, to compare
      std::string written;  // as written, for messages
      std::string value;
    };
    std::vector<word> words;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) != 0) ++i;
      if (i >= line.size()) break;
      std::size_t e = i;
      while (e < line.size() && std::isspace(static_cast<unsigned char>(line[e])) == 0) ++e;
      const std::string_view w = line.substr(i, e - i);
      i = e;
      const std::size_t eq = w.find('=');
      if (eq == std::string_view::npos || eq == 0) fail("'" + std::string(w) + "' is not KEY=VALUE");
      words.push_back({upper(w.substr(0, eq)), std::string(w.substr(0, eq)), std::string(w.substr(eq + 1))});
    }
    if (words.empty()) continue;
    if (words[0].key == "NODENAME") {
      fail("NodeName lines are not read: nodes register themselves (aqs-node); name them in a partition's Nodes=");
    }
    if (words[0].key != "PARTITIONNAME") {
      fail("a line must start with PartitionName= (got '" + words[0].written + "=')");
    }
    const std::string& name = words[0].value;
    const bool is_defaults = upper(name) == "DEFAULT";
    if (!is_defaults && !valid_name(name)) {
      fail("partition name '" + name + "' must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
    if (!is_defaults && out.find(name) != nullptr) {
      fail("partition '" + name + "' is declared twice (first on line " + std::to_string(out.find(name)->line) + ")");
    }
    partition p = defaults;
    p.name = name;
    p.line = line_no;
    p.is_default = false;
    std::set<std::string> seen;
    bool has_nodes = !p.nodes.empty() || p.all_nodes;
    for (std::size_t k = 1; k < words.size(); ++k) {
      const std::string& key = words[k].key;
      const std::string& shown = words[k].written;
      const std::string& value = words[k].value;
      if (!seen.insert(key).second) fail(shown + " is given twice");
      const std::string uv = upper(value);
      auto number = [&]() -> std::size_t {
        if (uv == "UNLIMITED" || uv == "INFINITE") return 0;
        if (!digits(value) || std::stoull(value) == 0) fail(shown + "=" + value + ": expected a positive number or UNLIMITED");
        return static_cast<std::size_t>(std::stoull(value));
      };
      auto duration = [&]() -> std::int64_t {
        const auto d = parse_duration(value);
        if (!d) fail(shown + "=" + value + ": expected a time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) or UNLIMITED");
        return *d;
      };
      auto names = [&]() -> std::vector<std::string> {
        if (uv == "ALL") return {};
        std::vector<std::string> v = split(value, ',');
        for (const auto& n : v) {
          if (n.empty()) fail(shown + "=" + value + ": an empty name in the list");
        }
        return v;
      };
      if (key == "NODES") {
        if (uv == "ALL") {
          p.all_nodes = true;
          p.nodes.clear();
        } else {
          try {
            p.nodes = expand_hostlist(value);
          } catch (const std::invalid_argument& e) {
            fail(std::string("Nodes: ") + e.what());
          }
          p.all_nodes = false;
        }
        has_nodes = true;
      } else if (key == "DEFAULT") {
        if (uv != "YES" && uv != "NO") fail("Default=" + value + ": expected YES or NO");
        if (is_defaults) fail("Default= cannot be set for PartitionName=DEFAULT");
        p.is_default = uv == "YES";
        if (p.is_default) {
          for (const auto& q : out.partitions) {
            if (q.is_default) fail("partition '" + q.name + "' (line " + std::to_string(q.line) + ") is already the default");
          }
        }
      } else if (key == "MAXTIME") {
        p.max_time_s = duration();
      } else if (key == "DEFAULTTIME") {
        p.default_time_s = duration();
      } else if (key == "MAXNODES") {
        p.max_nodes = number();
      } else if (key == "MAXCPUSPERJOB") {
        p.max_cpus_per_job = number();
      } else if (key == "ALLOWUSERS") {
        p.allow_users = names();
      } else if (key == "ALLOWGROUPS") {
        p.allow_groups = names();
      } else if (key == "STATE") {
        if (uv == "UP") {
          p.state = partition_state::up;
        } else if (uv == "DOWN") {
          p.state = partition_state::down;
        } else if (uv == "DRAIN") {
          p.state = partition_state::drain;
        } else if (uv == "INACTIVE") {
          p.state = partition_state::inactive;
        } else {
          fail("State=" + value + ": expected UP, DOWN, DRAIN or INACTIVE");
        }
      } else if (key == "POLICY") {
        const auto known = strategy_names();
        if (std::find(known.begin(), known.end(), value) == known.end()) {
          std::string list;
          for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
          fail("Policy=" + value + ": unknown policy (known: " + list + ")");
        }
        p.policy = value;
      } else {
        fail("unknown key '" + shown +
             "' (known: PartitionName, Nodes, Default, MaxTime, DefaultTime, MaxNodes, MaxCPUsPerJob, AllowUsers, "
             "AllowGroups, State, Policy)");
      }
    }
    if (p.max_time_s > 0 && p.default_time_s > p.max_time_s) {
      fail("DefaultTime is longer than MaxTime");
    }
    if (is_defaults) {
      defaults = std::move(p);
      continue;
    }
    if (!has_nodes) fail("partition '" + name + "' has no Nodes= (a host list, or ALL)");
    out.partitions.push_back(std::move(p));
  }
  if (out.partitions.empty()) return implicit_config();
  bool any_default = false;
  for (const auto& p : out.partitions) any_default = any_default || p.is_default;
  if (!any_default) out.partitions.front().is_default = true;
  return out;
}

std::optional<std::string> partition_refusal(const partition& p, const partition_request& r) {
  const std::string in = " (partition " + p.name + ")";
  if (p.state == partition_state::inactive || p.state == partition_state::drain) {
    return "Partition " + p.name + " is " + (p.state == partition_state::drain ? "draining" : "inactive") +
           ": it takes no new jobs";
  }
  if (!r.root) {
    if (!p.allow_users.empty() && std::find(p.allow_users.begin(), p.allow_users.end(), r.user) == p.allow_users.end()) {
      return "Access/permission denied: user " + r.user + " may not use partition " + p.name;
    }
    if (!p.allow_groups.empty()) {
      bool member = false;
      for (const auto& g : r.groups) {
        member = member || std::find(p.allow_groups.begin(), p.allow_groups.end(), g) != p.allow_groups.end();
      }
      if (!member) return "User's group not permitted to use this partition" + in;
    }
  }
  if (p.max_time_s > 0 && r.walltime_s > p.max_time_s) {
    return "Requested time limit is invalid (missing or exceeds some limit): " + format_partition_time(r.walltime_s) +
           " asked, MaxTime is " + format_partition_time(p.max_time_s) + in;
  }
  if (p.max_nodes > 0 && r.min_nodes > p.max_nodes) {
    return "Node count specification invalid: " + std::to_string(r.min_nodes) + " nodes asked, MaxNodes is " +
           std::to_string(p.max_nodes) + in;
  }
  if (p.max_cpus_per_job > 0 && r.cpus > p.max_cpus_per_job) {
    return "Requested node configuration is not available: " + std::to_string(r.cpus) +
           " processors asked, MaxCPUsPerJob is " + std::to_string(p.max_cpus_per_job) + in;
  }
  return std::nullopt;
}

partition_choice choose_partitions(const site_config& c, std::string_view asked) {
  partition_choice out;
  if (!c.configured || asked.empty()) {
    out.partitions.push_back(&c.default_partition());
    return out;
  }
  for (const auto& name : split(asked, ',')) {
    const partition* p = c.find(name);
    if (p == nullptr) {
      out.partitions.clear();
      out.error = "invalid partition name specified: '" + name + "' (partitions: " + c.names() + ")";
      return out;
    }
    if (std::find(out.partitions.begin(), out.partitions.end(), p) == out.partitions.end()) out.partitions.push_back(p);
  }
  return out;
}

}  // namespace aqs::core
