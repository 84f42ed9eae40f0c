// latency_matrix: the round trips of list_nodes as a from/to table.
#include "cmdline/latency_matrix.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace aqs::cmdline {

namespace {

std::string milliseconds(std::int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(us) / 1000.0);
  return buf;
}

void pad_left(std::string& out, const std::string& cell, std::size_t width) {
  if (cell.size() < width) out.append(width - cell.size(), ' ');
  out += cell;
}

}  // namespace

std::string format_latency_matrix(const std::vector<protocol::node_info>& nodes) {
  if (nodes.empty()) return {};
  const std::string corner = "FROM\\TO";
  std::size_t first = corner.size();
  for (const auto& n : nodes) first = std::max(first, n.name.size());
  // Cells as text, row by row, and each column's width.
  std::vector<std::vector<std::string>> cells(nodes.size(), std::vector<std::string>(nodes.size(), "-"));
  std::vector<std::size_t> width(nodes.size());
  std::map<std::string, std::size_t> column;
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    column.emplace(nodes[j].name, j);
    width[j] = std::max<std::size_t>(nodes[j].name.size(), 1);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& s : nodes[i].latency) {
      const auto it = column.find(s.node);
      if (it == column.end() || it->second == i) continue;
      cells[i][it->second] = milliseconds(s.rtt_us);
    }
    for (std::size_t j = 0; j < nodes.size(); ++j) width[j] = std::max(width[j], cells[i][j].size());
  }
  std::string out = corner;
  out.append(first - corner.size(), ' ');
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    out += "  ";
    pad_left(out, nodes[j].name, width[j]);
  }
  out += '\n';
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out += nodes[i].name;
    out.append(first - nodes[i].name.size(), ' ');
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      out += "  ";
      pad_left(out, cells[i][j], width[j]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace aqs::cmdline
