// geometry: where a job with a shape (tasks, nodes, memory, GPUs) fits.
#include "core/geometry.hpp"

#include <algorithm>
#include <numeric>

namespace aqs::core {

namespace {

// Spreads `tasks` over nodes with room for caps[i] tasks, as evenly as the
// caps allow (water-filling, the first nodes take the odd ones). The caller
// makes sure sum(caps) >= tasks.
std::vector<std::size_t> even_fill(const std::vector<std::size_t>& caps, std::size_t tasks) {
  std::vector<std::size_t> out(caps.size(), 0);
  std::vector<bool> done(caps.size(), false);
  std::size_t open = caps.size();
  for (;;) {
    if (open == 0 || tasks == 0) return out;
    const std::size_t share = tasks / open;
    bool saturated = false;
    for (std::size_t i = 0; i < caps.size(); ++i) {
      if (!done[i] && caps[i] <= share) {
        out[i] = caps[i];
        tasks -= caps[i];
        done[i] = true;
        --open;
        saturated = true;
      }
    }
    if (saturated) continue;
    std::size_t odd = tasks % open;
    for (std::size_t i = 0; i < caps.size(); ++i) {
      if (done[i]) continue;
      out[i] = share + (odd > 0 ? 1 : 0);
      if (odd > 0) --odd;
    }
    return out;
  }
}

std::size_t task_count(const job_shape& s, std::size_t procs) {
  const std::size_t c = std::max<std::size_t>(s.cpus_per_task, 1);
  return s.ntasks != 0 ? s.ntasks : std::max<std::size_t>(procs / c, 1);
}

// How many of the job's tasks fit on a node with `free_procs` processors
// free (all of them for `whole`), given its memory and GPUs left.
std::size_t tasks_fitting(const job_shape& s, const node& n, std::size_t free_procs, const node_resources& r,
                          bool whole) {
  const std::size_t c = std::max<std::size_t>(s.cpus_per_task, 1);
  if (s.exclusive && !whole) return 0;
  std::size_t cap = free_procs / c;
  if (s.gpus_per_node > 0 && (r.gpus < r.gpus_used || r.gpus - r.gpus_used < s.gpus_per_node)) return 0;
  const std::uint64_t mem_left = r.memory_mb > r.memory_used_mb ? r.memory_mb - r.memory_used_mb : 0;
  if (s.mem_per_node_mb > 0 && mem_left < s.mem_per_node_mb) return 0;
  if (s.mem_per_cpu_mb > 0) {
    // An exclusive job holds the whole node: its memory counts every processor.
    if (s.exclusive) {
      if (mem_left < s.mem_per_cpu_mb * n.procs) return 0;
    } else {
      cap = std::min<std::size_t>(cap, static_cast<std::size_t>(mem_left / (s.mem_per_cpu_mb * c)));
    }
  }
  return cap;
}

struct candidate {
  std::size_t node;
  std::size_t cap;  // tasks that fit
};

// Picks the nodes and the tasks on each out of the candidates, or nothing.
std::optional<std::vector<std::pair<std::size_t, std::size_t>>> choose(std::vector<candidate> cands,
                                                                        const job_shape& s, std::size_t tasks,
                                                                        std::size_t nodes_total) {
  std::erase_if(cands, [](const candidate& k) { return k.cap == 0; });
  std::vector<std::pair<std::size_t, std::size_t>> out;  // node, tasks
  if (s.tasks_per_node > 0) {
    const std::size_t k = s.tasks_per_node;
    std::size_t n = (tasks + k - 1) / k;
    n = std::max(n, s.min_nodes);
    if (s.max_nodes > 0 && n > s.max_nodes) return std::nullopt;
    if (n > tasks) return std::nullopt;  // a node with no task
    std::erase_if(cands, [&](const candidate& c) { return c.cap < std::min(k, tasks); });
    if (cands.size() < n) return std::nullopt;
    // Least room first: full nodes stay full for jobs that need them.
    std::stable_sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) { return a.cap < b.cap; });
    cands.resize(n);
    std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) { return a.node < b.node; });
    std::vector<std::size_t> caps;
    for (const auto& c : cands) caps.push_back(std::min(c.cap, k));
    const auto per = even_fill(caps, tasks);
    for (std::size_t i = 0; i < n; ++i) out.emplace_back(cands[i].node, per[i]);
    return out;
  }
  const std::size_t lo = std::max<std::size_t>(s.min_nodes, 1);
  const std::size_t hi = std::min({s.max_nodes > 0 ? s.max_nodes : nodes_total, cands.size(), tasks});
  if (lo > hi) return std::nullopt;
  // The fewest nodes that hold every task, one task at least on each.
  std::vector<candidate> by_room = cands;
  std::stable_sort(by_room.begin(), by_room.end(), [](const candidate& a, const candidate& b) { return a.cap > b.cap; });
  std::size_t n = 0;
  std::size_t room = 0;
  for (std::size_t i = 0; i < hi; ++i) {
    room += by_room[i].cap;
    if (i + 1 >= lo && room >= tasks) {
      n = i + 1;
      break;
    }
  }
  if (n == 0) return std::nullopt;
  std::vector<candidate> chosen;
  if (n == 1) {
    // One node: the one with the least room that holds the job.
    const candidate* best = nullptr;
    for (const auto& c : cands) {
      if (c.cap >= tasks && (best == nullptr || c.cap < best->cap)) best = &c;
    }
    chosen.push_back(*best);
  } else {
    chosen.assign(by_room.begin(), by_room.begin() + static_cast<std::ptrdiff_t>(n));
  }
  std::sort(chosen.begin(), chosen.end(), [](const candidate& a, const candidate& b) { return a.node < b.node; });
  std::vector<std::size_t> caps;
  for (const auto& c : chosen) caps.push_back(c.cap);
  const auto per = even_fill(caps, tasks);
  for (std::size_t i = 0; i < chosen.size(); ++i) out.emplace_back(chosen[i].node, per[i]);
  return out;
}

}  // namespace

std::optional<shaped_allocation> place_shaped(const cluster& c, const processor_set& free,
                                              const std::vector<node_resources>& res, const job_shape& shape,
                                              std::size_t procs) {
  const std::size_t tasks = task_count(shape, procs);
  const std::size_t cpt = std::max<std::size_t>(shape.cpus_per_task, 1);
  std::vector<candidate> cands;
  static const node_resources none{};
  for (std::size_t i = 0; i < c.nodes().size(); ++i) {
    const node& n = c.at(i);
    if (n.state != node_state::up) continue;
    const node_resources& r = i < res.size() ? res[i] : none;
    if (r.exclusive_owner) continue;
    const std::size_t free_here = free.count_range(n.first_proc, n.first_proc + n.procs);
    const bool whole = free_here == n.procs && r.jobs == 0 && r.memory_used_mb == 0 && r.gpus_used == 0;
    cands.push_back({i, tasks_fitting(shape, n, free_here, r, whole)});
  }
  const auto picked = choose(std::move(cands), shape, tasks, c.nodes().size());
  if (!picked) return std::nullopt;
  shaped_allocation a;
  a.procs = processor_set(c.size());
  for (const auto& [index, ntasks] : *picked) {
    const node& n = c.at(index);
    processor_set mine = processor_set::range(c.size(), n.first_proc, n.first_proc + n.procs);
    if (!shape.exclusive) mine = (free & mine).lowest(ntasks * cpt);
    const std::size_t held = mine.count();
    a.procs |= mine;
    a.nodes.push_back({index, ntasks, shape.memory_on_node(held), shape.gpus_per_node});
  }
  return a;
}

std::optional<std::string> never_fits(const cluster& c, const std::vector<node_resources>& res,
                                      const std::vector<std::size_t>& nodes, const job_shape& shape,
                                      std::size_t procs) {
  const std::size_t tasks = task_count(shape, procs);
  const std::size_t cpt = std::max<std::size_t>(shape.cpus_per_task, 1);
  std::vector<candidate> cands;
  std::size_t most_procs = 0;
  std::uint64_t most_mem = 0;
  std::size_t most_gpus = 0;
  for (const std::size_t i : nodes) {
    if (i >= c.nodes().size()) continue;
    const node& n = c.at(i);
    node_resources empty;
    if (i < res.size()) {
      empty.memory_mb = res[i].memory_mb;
      empty.gpus = res[i].gpus;
    }
    most_procs = std::max(most_procs, n.procs);
    most_mem = std::max(most_mem, empty.memory_mb);
    most_gpus = std::max(most_gpus, empty.gpus);
    cands.push_back({i, tasks_fitting(shape, n, n.procs, empty, true)});
  }
  if (choose(cands, shape, tasks, nodes.size())) return std::nullopt;
  const std::string task_text = std::to_string(tasks) + (tasks == 1 ? " task" : " tasks") +
                                (cpt > 1 ? " of " + std::to_string(cpt) + " processors" : "");
  if (nodes.empty()) return "there are no nodes to run it on";
  if (cpt > most_procs) {
    return "a task needs " + std::to_string(cpt) + " processors on one node; the largest node has " +
           std::to_string(most_procs);
  }
  if (shape.gpus_per_node > most_gpus) {
    return "it needs " + std::to_string(shape.gpus_per_node) + " GPUs per node; the most any node has is " +
           std::to_string(most_gpus);
  }
  const std::uint64_t mem_needed =
      shape.mem_per_node_mb != 0 ? shape.mem_per_node_mb : shape.mem_per_cpu_mb * (shape.exclusive ? 1 : cpt);
  if (mem_needed > most_mem) {
    return "it needs " + std::to_string(mem_needed) + " MB of memory on a node" +
           (shape.mem_per_node_mb != 0 ? "" : " per task") + "; the most any node has is " +
           std::to_string(most_mem) + " MB";
  }
  if (shape.tasks_per_node > 0) {
    const std::size_t need = (tasks + shape.tasks_per_node - 1) / shape.tasks_per_node;
    const std::size_t per = shape.tasks_per_node * cpt;
    const std::size_t n = std::max(need, shape.min_nodes);
    return "it needs " + std::to_string(n) + (n == 1 ? " node" : " nodes") + " with room for " +
           std::to_string(per) + (per == 1 ? " processor" : " processors") + " each; there are " +
           std::to_string(nodes.size()) + " nodes of at most " + std::to_string(most_procs) + " processors";
  }
  if (shape.min_nodes > nodes.size()) {
    return "it needs at least " + std::to_string(shape.min_nodes) + " nodes; there are " +
           std::to_string(nodes.size());
  }
  return task_text + (shape.max_nodes > 0 ? " on at most " + std::to_string(shape.max_nodes) + " nodes" : "") +
         " do not fit: the nodes have " +
         std::to_string(std::accumulate(cands.begin(), cands.end(), std::size_t{0},
                                        [](std::size_t s, const candidate& k) { return s + k.cap; })) +
         " task slots in all";
}

std::vector<std::size_t> task_layout(const std::vector<std::size_t>& procs, std::size_t cpus_per_task,
                                     std::size_t ntasks, std::size_t tasks_per_node) {
  const std::size_t c = std::max<std::size_t>(cpus_per_task, 1);
  std::vector<std::size_t> caps;
  caps.reserve(procs.size());
  for (const std::size_t p : procs) caps.push_back(tasks_per_node > 0 ? std::min(p / c, tasks_per_node) : p / c);
  const std::size_t room = std::accumulate(caps.begin(), caps.end(), std::size_t{0});
  return even_fill(caps, std::min(ntasks, room));
}

std::string tasks_per_node_text(const std::vector<std::size_t>& tasks) {
  std::string out;
  for (std::size_t i = 0; i < tasks.size();) {
    std::size_t j = i;
    while (j < tasks.size() && tasks[j] == tasks[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(tasks[i]);
    if (j - i > 1) out += "(x" + std::to_string(j - i) + ")";
    i = j;
  }
  return out;
}

}  // namespace aqs::core
