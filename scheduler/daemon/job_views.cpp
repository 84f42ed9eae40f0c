// job_views: what clients read: fjobs (list_jobs), fnodes (list_nodes) and a
// job's history.
#include <unordered_map>

#include <boost/asio/post.hpp>

#include "core/hostlist.hpp"
#include "daemon/job_views.hpp"
#include "daemon_base/permissions.hpp"
#include "logging/log.hpp"

namespace aqs::daemon {

namespace asio = boost::asio;
using core::job_state;

namespace {

// Bytes of job text after which a list_jobs page ends early (frames hold 16 MiB).
constexpr std::size_t k_list_page_bytes = std::size_t{8} << 20;


}  // namespace

job_views::job_views(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes,
                     access_view& view, std::int64_t list_page)
    : sched_(sched), pipe_(pipe), intake_(intake), nodes_(nodes), view_(view), list_page_(list_page) {}

void job_views::handle_list_jobs(const conn_ptr& c, const protocol::list_jobs& m) {
  store::job_filter f;
  f.user_name = m.user;
  f.states = m.states;
  f.include_finished = m.all;
  f.job_ids = m.job_ids;
  f.after_id = m.after_id;
  f.newest = m.newest;
  f.before_id = m.before_id;
  const std::int64_t page = std::min(m.limit.value_or(list_page_), list_page_);
  f.limit = page + 1;  // one more tells whether there is more
  pipe_.on_readers([this, c, f, page, rid = m.id, with_usage = m.usage] {
    try {
      std::vector<store::job_summary> found = pipe_.store().list_jobs(f);
      bool more = static_cast<std::int64_t>(found.size()) > page;
      if (more) {
        // Newest first: the extra one is the oldest, at the front.
        if (f.newest) found.erase(found.begin());
        found.resize(static_cast<std::size_t>(page));
      }
      // Issue 32: each job's usage, read once for the page.
      std::unordered_map<std::int64_t, store::job_usage> usage;
      if (with_usage && !found.empty()) {
        std::vector<std::int64_t> ids;
        ids.reserve(found.size());
        for (const auto& s : found) ids.push_back(s.id);
        for (auto& u : pipe_.store().job_usage_of(ids)) usage.emplace(u.job_id, std::move(u));
      }
      const auto nodes = spans();
      const auto why = view_.reasons();
      const auto parts = intake_.partitions();
      auto info = [&](const store::job_summary& s) {
        protocol::job_info j = to_job_info(s, nodes);
        if (j.state == core::job_state::pending) j.reason = why.of_pending(s.id);
        // With partitions configured a job without -p is in the default one.
        if (!j.partition && parts->configured) j.partition = parts->default_partition().name;
        if (with_usage) {
          const auto u = usage.find(s.id);
          // What was measured is the owner's and root's to see (as Slurm's
          // PrivateData=usage); the rest is what fjobs shows anyone.
          add_usage(j, s, u == usage.end() ? nullptr : &u->second, may_act_on_job(c->peer(), s.uid));
        }
        return j;
      };
      // The jobs go out as JSON text written straight from the rows: built
      // as a JSON object and dumped, 10,000 jobs cost about 0.15 s of CPU
      // here, most of it in allocations (docs/benchmarks.md, fjobs).
      std::string text = "\"jobs\":[";
      text.reserve(found.size() * 320 + 16);
      std::size_t sent = 0;
      for (const auto& s : found) {
        // A page stays well inside a frame even when every job holds a map
        // over a big cluster (16,384 processors: 32 KiB per job).
        if (text.size() > k_list_page_bytes && sent > 0) break;
        if (sent > 0) text += ',';
        protocol::append_json(text, info(s));
        ++sent;
      }
      text += ']';
      if (sent < found.size()) {
        more = true;
        // Newest first: what was left out is the newer end; the client asks
        // again below the oldest it got, so keep the newest instead.
        if (f.newest) {
          text = "\"jobs\":[";
          const std::size_t skip = found.size() - sent;
          for (std::size_t i = skip; i < found.size(); ++i) {
            if (i > skip) text += ',';
            protocol::append_json(text, info(found[i]));
          }
          text += ']';
        }
      }
      protocol::ok reply{rid, {{"more", more}}};
      reply.raw_members = std::move(text);
      c->send(std::move(reply));
    } catch (const std::exception& e) {
      reply_error(c, rid, protocol::error_code::internal, std::string("cannot list jobs: ") + e.what());
    }
  });
}

void job_views::handle_list_nodes(const conn_ptr& c, const protocol::list_nodes& m) {
  const auto parts = intake_.partitions();  // one snapshot for the whole answer
  protocol::list_nodes_reply reply;
  for (const node_entry& n : nodes_) {
    protocol::listed_node info;
    info.name = n.name;
    switch (sched_.machine().at(n.index).state) {
      case core::node_state::up: info.state = protocol::node_state::up; break;
      case core::node_state::drained: info.state = protocol::node_state::drain; break;
      case core::node_state::down: info.state = protocol::node_state::down; break;
    }
    info.first_proc = static_cast<std::int64_t>(n.first_proc);
    info.nprocs = static_cast<std::int64_t>(n.nprocs);
    info.procs = core::processor_set::range(sched_.machine().size(), n.first_proc, n.first_proc + n.nprocs).to_ranges();
    const core::processor_set mine = sched_.machine().procs_of(n.index);
    for (const auto& [end, id] : sched_.holding_by_end()) {
      const core::job& j = sched_.get(id);
      if (j.procs.intersects(mine) || j.target.intersects(mine)) info.jobs.push_back(static_cast<std::int64_t>(id));
    }
    std::sort(info.jobs.begin(), info.jobs.end());
    info.memory_mb = n.memory_mb;
    info.gpus = n.gpus;
    info.connected = static_cast<bool>(n.conn);
    info.alloc = static_cast<std::int64_t>((sched_.held() & mine).count());
    info.latency = nodes_.latency_row(n.name);
    info.containment = n.containment;
    if (parts->configured) {
      for (const auto& p : parts->partitions) {
        if (p.has_node(n.name)) info.partitions.push_back(p.name);
      }
    }
    reply.nodes.push_back(std::move(info));
  }
  // Live jobs per partition (the core's partition indices follow the
  // configuration's order): pending ones in each they may run in, running
  // ones in the one they run in.
  const std::size_t nparts = parts->configured ? parts->partitions.size() : 0;
  std::vector<std::int64_t> pending(nparts, 0), running(nparts, 0);
  for (const auto& [id, entry] : jobs().live()) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr) continue;
    if (j->state == job_state::pending) {
      ++reply.jobs_pending;
      for (std::size_t i : j->partitions) {
        if (i < nparts) ++pending[i];
      }
    } else if (j->state == job_state::running || j->state == job_state::resizing) {
      ++reply.jobs_running;
      if (j->partition < nparts) ++running[j->partition];
    }
  }
  if (parts->configured) {
    for (std::size_t i = 0; i < nparts; ++i) {
      const auto& p = parts->partitions[i];
      protocol::partition_info pi;
      pi.jobs_pending = pending[i];
      pi.jobs_running = running[i];
      pi.name = p.name;
      pi.state = std::string(core::to_string(p.state));
      pi.is_default = p.is_default;
      pi.nodes = p.all_nodes ? "ALL" : core::compress_hostlist(p.nodes);
      pi.max_time_s = p.max_time_s;
      pi.default_time_s = p.default_time_s;
      pi.max_nodes = static_cast<std::int64_t>(p.max_nodes);
      pi.max_cpus_per_job = static_cast<std::int64_t>(p.max_cpus_per_job);
      reply.partitions.push_back(std::move(pi));
    }
  }
  c->send(protocol::make_ok(m.id, reply));
}

void job_views::handle_job_history(const conn_ptr& c, const protocol::job_history& m) {
  pipe_.on_readers([this, c, m] {
    try {
      auto rec = pipe_.store().get_job(m.job_id);
      if (!rec) return reply_error(c, m.id, protocol::error_code::not_found, "no job " + std::to_string(m.job_id));
      if (!may_act_on_job(c->peer(), rec->request.uid)) {
        return reply_error(c, m.id, protocol::error_code::permission_denied,
                           "job " + std::to_string(m.job_id) + " belongs to another user: only its owner and root see its history");
      }
      const auto nodes = spans();
      protocol::job_history_reply reply;
      reply.job = to_job_info(store::summary_of(*rec), nodes);
      for (const auto& e : pipe_.store().job_history(m.job_id)) {
        protocol::job_history_event ev;
        ev.time = iso8601(e.time);
        ev.old_state = e.old_state;
        ev.new_state = e.new_state;
        if (!e.old_procs.none()) ev.old_procs = e.old_procs.to_string();
        if (!e.new_procs.none()) ev.new_procs = e.new_procs.to_string();
        ev.reason = e.reason;
        ev.exit_code = e.exit_code;
        ev.signal = e.term_signal;
        reply.events.push_back(std::move(ev));
      }
      c->send(protocol::make_ok(m.id, reply));
    } catch (const std::exception& e) {
      reply_error(c, m.id, protocol::error_code::internal, std::string("cannot read the job: ") + e.what());
    }
  });
}

}  // namespace aqs::daemon
