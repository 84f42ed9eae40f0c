// srun_step: srun's tasks: the step's plan, the --multi-prog file, and the
// wrapper that each task runs in.
#include "slurm/srun_step.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cerrno>
#include <charconv>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "cmdline/usage_error.hpp"
#include "core/geometry.hpp"
#include "core/hostlist.hpp"

namespace aqs::slurm {

using cmdline::usage_error;

namespace {

std::optional<std::int64_t> number(std::string_view s) {
  std::int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// f(item) for each item of a comma-separated list: "a,,b" has an empty
// item, a trailing comma adds none.
template <class F>
void for_each_item(std::string_view list, F&& f) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    f(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
}

std::string shown(std::string_view s) {
  std::string out(s.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return out;
}

// Shell-like words: blanks separate, quotes group, '#' outside quotes at the
// start of a word ends the line.
std::vector<std::string> words_of(std::string_view line, std::size_t line_no) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size() || line[i] == '#') break;
    std::string w;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
      const char c = line[i];
      if (c == '\'' || c == '"') {
        const auto close = line.find(c, i + 1);
        if (close == std::string_view::npos) {
          throw usage_error("--multi-prog line " + std::to_string(line_no) + ": unterminated quote");
        }
        w += line.substr(i + 1, close - i - 1);
        i = close + 1;
        continue;
      }
      w += c;
      ++i;
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

srun_task_options split_task_options(std::span<const std::string> options) {
  srun_task_options out;
  for (const auto& w : options) {
    if (w == "-l" || w == "--label") {
      out.label = true;
    } else if (w == "--multi-prog") {
      out.multi_prog = true;
    } else if (w == "--overlap") {
      out.overlap = true;
    } else {
      out.rest.push_back(w);
    }
  }
  return out;
}

std::vector<multi_prog_line> parse_multi_prog(std::string_view text) {
  std::vector<multi_prog_line> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    auto words = words_of(line, line_no);
    if (words.empty()) continue;
    const std::string where = "--multi-prog line " + std::to_string(line_no) + ": ";
    multi_prog_line l;
    const std::string tasks = words.front();
    if (tasks == "*") {
      l.any = true;
    } else {
      for_each_item(tasks, [&](std::string_view item) {
        const auto dash = item.find('-');
        const auto lo = number(item.substr(0, dash));
        const auto hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1));
        if (!lo || !hi || *hi < *lo) throw usage_error(where + "invalid task list '" + shown(tasks) + "'");
        l.ranges.emplace_back(*lo, *hi);
      });
    }
    if (words.size() < 2) throw usage_error(where + "no program for tasks '" + shown(tasks) + "'");
    l.words.assign(words.begin() + 1, words.end());
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<std::vector<std::string>> multi_prog_command(const std::vector<multi_prog_line>& lines, std::int64_t rank) {
  for (const auto& l : lines) {
    std::optional<std::int64_t> offset;
    if (l.any) {
      offset = rank;
    } else {
      std::int64_t before = 0;
      for (const auto& [lo, hi] : l.ranges) {
        if (rank >= lo && rank <= hi) {
          offset = before + (rank - lo);
          break;
        }
        before += hi - lo + 1;
      }
    }
    if (!offset) continue;
    std::vector<std::string> out;
    for (const auto& w : l.words) {
      std::string r;
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (w[i] == '%' && i + 1 < w.size() && (w[i + 1] == 't' || w[i + 1] == 'o')) {
          r += std::to_string(w[i + 1] == 't' ? rank : *offset);
          ++i;
        } else {
          r += w[i];
        }
      }
      out.push_back(std::move(r));
    }
    return out;
  }
  return std::nullopt;
}

void check_multi_prog(const std::vector<multi_prog_line>& lines, std::int64_t ntasks) {
  for (std::int64_t r = 0; r < ntasks; ++r) {
    if (!multi_prog_command(lines, r)) {
      throw usage_error("--multi-prog: no program for task " + std::to_string(r) + " (the step has " +
                        std::to_string(ntasks) + " tasks)");
    }
  }
}

namespace {

// The job's nodes in map order as the agent described them: each node's
// name, its number of tasks and its SLURM_NODEID.
struct job_node {
  std::string name;
  std::int64_t tasks = 0;
  std::int64_t id = 0;
  std::int64_t procs = 0;  // its processors in the job's map (0: not listed)
};
std::vector<job_node> job_nodes(std::string_view aqs_nodelist, std::string_view tasks_per_node,
                                std::string_view job_nodelist) {
  // The job's nodes in map order (consecutive entries of one node merged).
  std::vector<std::string> names;
  std::vector<std::int64_t> procs;
  for_each_item(aqs_nodelist, [&](std::string_view item) {
    const auto colon = item.rfind(':');
    const std::string name(item.substr(0, colon));
    if (name.empty()) return;
    if (names.empty() || names.back() != name) {
      names.push_back(name);
      procs.push_back(0);
    }
    // "0-3" or "5": how many processors of the map this entry is.
    if (colon == std::string_view::npos) return;
    const std::string_view range = item.substr(colon + 1);
    const auto dash = range.find('-');
    const auto a = number(range.substr(0, dash));
    const auto b = dash == std::string_view::npos ? a : number(range.substr(dash + 1));
    if (a && b && *b >= *a) procs.back() += *b - *a + 1;
  });
  // "2(x3),1": tasks per node in the same order.
  std::vector<std::int64_t> per_node;
  for_each_item(tasks_per_node, [&](std::string_view item) {
    const auto paren = item.find("(x");
    const auto n = number(item.substr(0, paren));
    std::int64_t times = 1;
    if (paren != std::string_view::npos && item.ends_with(")")) {
      times = number(item.substr(paren + 2, item.size() - paren - 3)).value_or(1);
    }
    for (std::int64_t k = 0; k < times && per_node.size() < 65536; ++k) per_node.push_back(n.value_or(0));
  });
  std::vector<std::string> sorted;
  try {
    sorted = core::expand_hostlist(job_nodelist);
  } catch (const std::exception&) {
    sorted.clear();
  }
  std::vector<job_node> out;
  for (std::size_t k = 0; k < per_node.size(); ++k) {
    job_node n;
    n.tasks = per_node[k];
    n.id = static_cast<std::int64_t>(k);
    if (k < names.size()) {
      n.name = names[k];
      n.procs = procs[k];
      const auto it = std::find(sorted.begin(), sorted.end(), names[k]);
      if (it != sorted.end()) n.id = static_cast<std::int64_t>(it - sorted.begin());
    }
    out.push_back(std::move(n));
  }
  return out;
}

// "0,1,4-5" -> the cpu numbers as written, in order.
std::vector<std::string> slot_cpus(std::string_view list, std::size_t line_no) {
  std::vector<std::string> out;
  for_each_item(list, [&](std::string_view item) {
    const auto dash = item.find('-');
    const auto a = number(item.substr(0, dash));
    const auto b = dash == std::string_view::npos ? a : number(item.substr(dash + 1));
    if (!a || !b || *b < *a || *b - *a > 4096) {
      throw usage_error("the job's rankfile: line " + std::to_string(line_no) + ": bad slot list '" + shown(list) + "'");
    }
    for (std::int64_t c = *a; c <= *b; ++c) out.push_back(std::to_string(c));
  });
  return out;
}

}  // namespace

std::vector<std::int64_t> task_node_ids(std::string_view aqs_nodelist, std::string_view tasks_per_node,
                                        std::string_view job_nodelist, std::int64_t ntasks) {
  const std::vector<job_node> nodes = job_nodes(aqs_nodelist, tasks_per_node, job_nodelist);
  std::vector<std::int64_t> out;
  std::size_t k = 0;
  std::int64_t used = 0;
  while (static_cast<std::int64_t>(out.size()) < ntasks) {
    while (k < nodes.size() && used >= nodes[k].tasks) {
      ++k;
      used = 0;
    }
    if (nodes.empty()) {
      out.push_back(0);
    } else {
      out.push_back(nodes[k < nodes.size() ? k : nodes.size() - 1].id);
    }
    ++used;
  }
  return out;
}

job_slots read_job_slots(std::string_view job_rankfile, std::string_view aqs_nodelist,
                         std::string_view tasks_per_node, std::string_view job_nodelist) {
  // The job's ranks, in rank order: "rank I=HOST slot=LIST".
  struct rank_line {
    std::string host;
    std::vector<std::string> cpus;
    std::string text;  // the slot list as written
  };
  std::vector<rank_line> ranks;
  std::size_t line_no = 0;
  while (!job_rankfile.empty()) {
    const auto nl = job_rankfile.find('\n');
    std::string_view line = job_rankfile.substr(0, nl);
    job_rankfile = nl == std::string_view::npos ? std::string_view() : job_rankfile.substr(nl + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos || line.starts_with("#")) continue;
    const auto eq = line.find('=');
    const auto slot = line.find(" slot=");
    if (!line.starts_with("rank ") || eq == std::string_view::npos || slot == std::string_view::npos || slot < eq) {
      throw usage_error("the job's rankfile: line " + std::to_string(line_no) + " is not 'rank N=HOST slot=LIST': '" +
                        shown(line) + "'");
    }
    const auto rank = number(line.substr(5, eq - 5));
    if (!rank || *rank != static_cast<std::int64_t>(ranks.size())) {
      throw usage_error("the job's rankfile: line " + std::to_string(line_no) + " is not rank " +
                        std::to_string(ranks.size()));
    }
    std::string_view list = line.substr(slot + 6);
    while (!list.empty() && (list.back() == ' ' || list.back() == '\r')) list.remove_suffix(1);
    ranks.push_back({std::string(line.substr(eq + 1, slot - eq - 1)), slot_cpus(list, line_no), std::string(list)});
  }
  // The job's tasks by node (SLURM_TASKS_PER_NODE, map order, as the
  // rankfile's ranks are); each node's processors are its tasks' slots.
  const std::vector<job_node> nodes = job_nodes(aqs_nodelist, tasks_per_node, job_nodelist);
  std::int64_t listed = 0;
  for (const auto& n : nodes) listed += n.tasks;
  if (nodes.empty() || listed != static_cast<std::int64_t>(ranks.size())) {
    throw usage_error("the job's rankfile has " + std::to_string(ranks.size()) + " ranks where SLURM_TASKS_PER_NODE has " +
                      std::to_string(listed) + " tasks");
  }
  job_slots out;
  std::size_t first = 0;
  for (const auto& n : nodes) {
    job_slots::node node;
    node.id = n.id;
    node.first_slot = out.count;
    if (n.tasks > 0) node.host = ranks[first].host;
    // The node's processors: as many as the job's map gives it (AQS_NODELIST;
    // an agent with --procs beyond its cores pins several onto one cpu, and
    // a -c rank lists each of its cpus once), on its tasks' cpus in turn.
    std::vector<std::string> cycle;
    for (std::size_t r = first; r < first + static_cast<std::size_t>(n.tasks); ++r) {
      cycle.insert(cycle.end(), ranks[r].cpus.begin(), ranks[r].cpus.end());
    }
    const auto procs = static_cast<std::size_t>(std::max<std::int64_t>(n.procs, 0));
    const std::size_t count = std::max(procs, cycle.size());
    for (std::size_t k = 0; k < count && !cycle.empty(); ++k) node.cpus.push_back(cycle[k % cycle.size()]);
    // The job's tasks there, each on its share of them, in order.
    const std::size_t per_task = n.tasks > 0 ? std::max<std::size_t>(1, count / static_cast<std::size_t>(n.tasks)) : 1;
    for (std::int64_t t = 0; t < n.tasks; ++t) {
      std::vector<std::size_t> task;
      for (std::size_t k = 0; k < per_task; ++k) {
        const std::size_t at = static_cast<std::size_t>(t) * per_task + k;
        if (at < node.cpus.size()) task.push_back(node.first_slot + at);
      }
      node.tasks.push_back(std::move(task));
      node.task_text.push_back(ranks[first + static_cast<std::size_t>(t)].text);
    }
    first += static_cast<std::size_t>(n.tasks);
    out.count += node.cpus.size();
    out.nodes.push_back(std::move(node));
  }
  return out;
}

step_placement place_step(const job_slots& job, const step_shape& shape, const std::vector<bool>& busy) {
  if (shape.ntasks < 1) throw usage_error("a step needs at least one task");
  const std::int64_t cpus_per_task = shape.cpus_per_task.value_or(1);
  if (cpus_per_task < 1) throw usage_error("-c takes at least 1 processor per task");
  if (shape.ntasks_per_node && *shape.ntasks_per_node < 1) throw usage_error("--ntasks-per-node takes at least 1");
  auto is_busy = [&](std::size_t slot) { return slot < busy.size() && busy[slot]; };
  step_placement out;
  auto add = [&](const job_slots::node& n, const std::vector<std::size_t>& slots, const std::string* text = nullptr) {
    // Each cpu once (several processors of a --procs agent share one).
    std::vector<std::string> cpus;
    for (const std::size_t k : slots) {
      const std::string& c = n.cpus[k - n.first_slot];
      if (std::find(cpus.begin(), cpus.end(), c) == cpus.end()) cpus.push_back(c);
    }
    std::string list;
    for (const auto& c : cpus) list += (list.empty() ? "" : ",") + c;
    if (text != nullptr) list = *text;
    out.rankfile += "rank " + std::to_string(out.node_ids.size()) + "=" + n.host + " slot=" + list + "\n";
    out.node_ids.push_back(n.id);
    out.slots.insert(out.slots.end(), slots.begin(), slots.end());
  };
  std::int64_t room = 0;
  const bool own_layout = shape.cpus_per_task || shape.ntasks_per_node || shape.nodes;
  if (!own_layout) {
    for (const auto& n : job.nodes) {
      // The job's own tasks, in order, those whose processors are free.
      for (std::size_t t = 0; t < n.tasks.size(); ++t) {
        const auto& task = n.tasks[t];
        if (std::any_of(task.begin(), task.end(), is_busy)) continue;
        ++room;
        if (static_cast<std::int64_t>(out.node_ids.size()) < shape.ntasks) add(n, task, &n.task_text[t]);
      }
    }
  } else {
    // Each node's free processors and how many tasks of C fit there.
    std::vector<std::vector<std::size_t>> free(job.nodes.size());
    std::vector<std::int64_t> fits(job.nodes.size(), 0);
    for (std::size_t i = 0; i < job.nodes.size(); ++i) {
      const auto& n = job.nodes[i];
      for (std::size_t k = 0; k < n.cpus.size(); ++k) {
        if (!is_busy(n.first_slot + k)) free[i].push_back(n.first_slot + k);
      }
      fits[i] = static_cast<std::int64_t>(free[i].size()) / cpus_per_task;
      if (shape.ntasks_per_node) fits[i] = std::min(fits[i], *shape.ntasks_per_node);
    }
    // -N K: the first K nodes with room, each at least one task (fewer
    // tasks than K: as many nodes as tasks, as Slurm's srun does).
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < job.nodes.size(); ++i) {
      if (fits[i] > 0) used.push_back(i);
    }
    if (shape.nodes) {
      const auto want = static_cast<std::size_t>(std::min(*shape.nodes, shape.ntasks));
      if (used.size() < want) {
        throw usage_error("More processors requested than permitted: " + std::to_string(*shape.nodes) + " nodes asked for, " +
                          std::to_string(used.size()) + (busy.empty() ? "" : " free") + " in the job's allocation");
      }
      used.resize(want);
    }
    // Block distribution: a node's tasks before the next node's, keeping
    // one task for each node still to come when -N asks for them.
    std::int64_t left = shape.ntasks;
    for (std::size_t u = 0; u < used.size(); ++u) {
      const std::size_t i = used[u];
      room += fits[i];
      const std::int64_t later = shape.nodes ? static_cast<std::int64_t>(used.size() - u - 1) : 0;
      const std::int64_t take = std::max<std::int64_t>(0, std::min(fits[i], left - later));
      for (std::int64_t t = 0; t < take; ++t) {
        const auto from = free[i].begin() + static_cast<std::ptrdiff_t>(t * cpus_per_task);
        add(job.nodes[i], std::vector<std::size_t>(from, from + static_cast<std::ptrdiff_t>(cpus_per_task)));
      }
      left -= take;
    }
  }
  if (static_cast<std::int64_t>(out.node_ids.size()) < shape.ntasks) {
    throw usage_error("More processors requested than permitted: the job's allocation has room for " +
                      std::to_string(room) + (busy.empty() ? "" : " more") + " tasks of " +
                      std::to_string(cpus_per_task) + (cpus_per_task == 1 ? " processor" : " processors") +
                      (shape.ntasks_per_node ? " at " + std::to_string(*shape.ntasks_per_node) + " per node" : std::string()) +
                      ", not " + std::to_string(shape.ntasks));
  }
  return out;
}

std::string join_runs(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]) + "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

std::vector<std::int64_t> split_runs(std::string_view text) {
  std::vector<std::int64_t> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const auto star = item.find('*');
    const auto v = number(item.substr(0, star));
    const auto n = star == std::string_view::npos ? std::optional<std::int64_t>(1) : number(item.substr(star + 1));
    if (!v || !n || *n > (1 << 24)) throw usage_error("bad node ids '" + shown(item) + "'");
    out.insert(out.end(), static_cast<std::size_t>(*n), *v);
  }
  return out;
}

std::vector<std::string> task_plan_words(const task_plan& p) {
  std::vector<std::string> out{"ntasks=" + std::to_string(p.ntasks), "step=" + std::to_string(p.step_id),
                               "nodes=" + join_runs(p.node_ids)};
  if (p.label) out.emplace_back("label=1");
  if (p.multi_prog) out.push_back("multi-prog=" + *p.multi_prog);
  if (p.cpus_per_task) out.push_back("cpus=" + std::to_string(*p.cpus_per_task));
  out.emplace_back("--");
  out.insert(out.end(), p.command.begin(), p.command.end());
  return out;
}

task_plan parse_task_plan(std::span<const std::string> words) {
  task_plan p;
  std::size_t i = 0;
  for (; i < words.size() && words[i] != "--"; ++i) {
    const std::string& w = words[i];
    const auto eq = w.find('=');
    const std::string key = w.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (key == "ntasks") {
      p.ntasks = number(value).value_or(0);
      if (p.ntasks < 1) throw usage_error("bad task count '" + shown(value) + "'");
    } else if (key == "step") {
      p.step_id = number(value).value_or(0);
    } else if (key == "nodes") {
      p.node_ids = split_runs(value);
    } else if (key == "label") {
      p.label = true;
    } else if (key == "multi-prog") {
      p.multi_prog = value;
    } else if (key == "cpus") {
      p.cpus_per_task = number(value);
      if (!p.cpus_per_task || *p.cpus_per_task < 1) throw usage_error("bad processors per task '" + shown(value) + "'");
    } else {
      throw usage_error("unknown task plan word '" + shown(w) + "'");
    }
  }
  if (i >= words.size()) throw usage_error("a task plan ends with -- COMMAND");
  p.command.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  if (p.command.empty()) throw usage_error("a task plan ends with -- COMMAND");
  return p;
}

std::vector<std::pair<std::string, std::string>> task_variables(const task_plan& p, std::int64_t rank,
                                                                std::int64_t local_rank) {
  // The task's node, and its number there: the tasks before it on that node
  // (block layout, as the job's rankfile places them). Without a layout,
  // what mpirun says.
  std::int64_t node = 0;
  if (!p.node_ids.empty()) {
    const auto at = static_cast<std::size_t>(std::min<std::int64_t>(rank, static_cast<std::int64_t>(p.node_ids.size()) - 1));
    node = p.node_ids[at];
    if (static_cast<std::size_t>(rank) < p.node_ids.size()) {
      local_rank = std::count(p.node_ids.begin(), p.node_ids.begin() + static_cast<std::ptrdiff_t>(at), node);
    }
  }
  std::vector<std::int64_t> distinct = p.node_ids;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const std::string n = std::to_string(p.ntasks), step = std::to_string(p.step_id);
  std::vector<std::pair<std::string, std::string>> out = {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_LOCALID", std::to_string(local_rank)},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_NTASKS", n},
          {"SLURM_NPROCS", n},
          {"SLURM_STEP_NUM_TASKS", n},
          {"SLURM_STEP_NUM_NODES", std::to_string(std::max<std::size_t>(distinct.size(), 1))},
          {"SLURM_STEP_ID", step},
          {"SLURM_STEPID", step}};
  if (p.cpus_per_task) out.emplace_back("SLURM_CPUS_PER_TASK", std::to_string(*p.cpus_per_task));
  return out;
}

namespace {

std::int64_t env_number(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  return number(v).value_or(fallback);
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

[[noreturn]] void exec_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& w : command) argv.push_back(const_cast<char*>(w.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const std::string msg = "srun: error: execve(): " + command.front() + ": " + std::strerror(errno) + "\n";
  write_all(STDERR_FILENO, msg);
  ::_exit(errno == ENOENT ? 127 : 126);
}

}  // namespace

int run_task(const task_plan& p) {
  const std::int64_t rank = env_number("OMPI_COMM_WORLD_RANK", 0);
  const std::int64_t local = env_number("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  for (const auto& [k, v] : task_variables(p, rank, local)) ::setenv(k.c_str(), v.c_str(), 1);
  std::vector<std::string> command = p.command;
  if (p.multi_prog) {
    const int fd = ::open(p.multi_prog->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw usage_error("cannot read --multi-prog file " + *p.multi_prog + ": " + std::strerror(errno));
    std::string text;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1 << 20)) text.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    const auto picked = multi_prog_command(parse_multi_prog(text), rank);
    if (!picked) throw usage_error("--multi-prog: no program for task " + std::to_string(rank));
    command = *picked;
  }
  if (!p.label) exec_command(command);

  // -l: the task's lines, each "RANK: ", through pipes.
  const std::string width_of = std::to_string(std::max<std::int64_t>(p.ntasks - 1, 0));
  std::string prefix = std::to_string(rank);
  if (prefix.size() < width_of.size()) prefix.insert(0, width_of.size() - prefix.size(), ' ');
  prefix += ": ";
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot create pipes: ") + std::strerror(errno));
  }
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    exec_command(command);
  }
  ::close(out[1]);
  ::close(err[1]);
  struct stream {
    int from, to;
    std::string partial;
  } streams[2] = {{out[0], STDOUT_FILENO, {}}, {err[0], STDERR_FILENO, {}}};
  int open_streams = 2;
  while (open_streams > 0) {
    pollfd fds[2];
    for (int k = 0; k < 2; ++k) fds[k] = {streams[k].from, POLLIN, 0};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      auto& s = streams[k];
      if (s.from < 0 || (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[8192];
      const ssize_t n = ::read(s.from, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!s.partial.empty()) write_all(s.to, prefix + s.partial + "\n");
        s.partial.clear();
        ::close(s.from);
        s.from = -1;
        --open_streams;
        continue;
      }
      s.partial.append(buf, static_cast<std::size_t>(n));
      std::string lines;
      std::size_t start = 0;
      for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
        lines += prefix;
        lines.append(s.partial, start, nl - start + 1);
      }
      s.partial.erase(0, start);
      if (!lines.empty()) write_all(s.to, lines);
    }
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

namespace {

// A job's first step: this user's counters untouched for 30 days (their jobs
// are long gone) are removed, so /tmp does not fill with one file per job.
void forget_old_counters(const std::string& keep) {
  const std::string prefix = "aqs-steps-" + std::to_string(::getuid()) + "-";
  const auto limit = std::chrono::system_clock::now() - std::chrono::hours(24 * 30);
  std::error_code ec;
  int seen = 0;
  for (std::filesystem::directory_iterator it("/tmp", ec), end; !ec && it != end && seen < 100000; it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || it->path() == keep) continue;
    struct stat sb {};
    if (::lstat(it->path().c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != ::getuid()) continue;
    if (std::chrono::system_clock::from_time_t(sb.st_mtime) < limit) ::unlink(it->path().c_str());
  }
}

}  // namespace

namespace {

// /tmp/aqs-steps-UID-CLUSTER-JOB: this user's files about one job's steps.
std::string steps_path(std::int64_t job_id, std::string_view cluster) {
  std::string tag;
  for (const char c : cluster.substr(0, 64)) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) tag += c;
  }
  return "/tmp/aqs-steps-" + std::to_string(::getuid()) + "-" + (tag.empty() ? "" : tag + "-") + std::to_string(job_id);
}

// A write lock on byte `slot` (F_SETLK), or whether another open file
// description holds one there (F_GETLK).
bool slot_lock(int fd, int cmd, std::size_t slot, short type = F_WRLCK) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(slot);
  fl.l_len = 1;
  if (::fcntl(fd, cmd, &fl) != 0) return false;
  return cmd != F_OFD_GETLK || fl.l_type != F_UNLCK;
}

}  // namespace

step_claim::step_claim(std::int64_t job_id, std::string_view cluster) {
  const std::string path = steps_path(job_id, cluster) + ".slots";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != ::getuid()) {
    ::close(fd);  // another user's planted file: no claims, never a lock there
    return;
  }
  fd_ = fd;
}

step_claim::~step_claim() {
  if (fd_ >= 0) ::close(fd_);
}

step_placement step_claim::claim(std::size_t slots, const std::function<step_placement(const std::vector<bool>&)>& place,
                                 const std::function<void()>& waiting) {
  // What can never fit is refused at once, as Slurm's srun does.
  step_placement all_free = place({});
  if (fd_ < 0) return all_free;
  bool told = false;
  for (;;) {
    // One claimer at a time (flock and OFD locks do not interact on Linux):
    // look at what other steps hold, choose, lock.
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
    std::vector<bool> busy(slots, false);
    for (std::size_t k = 0; k < slots; ++k) busy[k] = slot_lock(fd_, F_OFD_GETLK, k);
    std::optional<step_placement> p;
    try {
      p = place(busy);
      for (const std::size_t k : p->slots) {
        if (!slot_lock(fd_, F_OFD_SETLK, k)) {
          for (const std::size_t u : p->slots) slot_lock(fd_, F_OFD_SETLK, u, F_UNLCK);
          p.reset();
          break;
        }
      }
    } catch (const usage_error&) {
      p.reset();  // busy now; it fits once other steps end
    }
    ::flock(fd_, LOCK_UN);
    if (p) return *p;
    if (!told && waiting) waiting();
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::int64_t next_step_id(std::int64_t job_id, std::string_view cluster) {
  const std::string path = steps_path(job_id, cluster);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  struct stat sb {};
  std::int64_t id = 0;
  if (::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == ::getuid() && ::flock(fd, LOCK_EX) == 0) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) id = number(std::string_view(buf, static_cast<std::size_t>(n))).value_or(0);
    const std::string next = std::to_string(id + 1);
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, next.data(), next.size(), 0);
  }
  ::close(fd);
  if (id == 0) forget_old_counters(path);
  return id;
}

}  // namespace aqs::slurm
