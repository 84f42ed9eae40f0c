// launcher: a started job's launch on the node that runs its script, what
// agents report about it (started, refused, exited, listed, lost), and the
// signals and kills sent to its instance.
#include "daemon/launcher.hpp"

#include <algorithm>
#include <csignal>
#include <set>

#include <boost/asio/post.hpp>

#include "core/map_display.hpp"
#include "daemon/job_records.hpp"
#include "logging/log.hpp"
#include "protocol/auth.hpp"

namespace aqs::daemon {

using core::job_state;

launcher::launcher(core::scheduler& sched, write_pipeline& pipe, job_intake& intake, node_manager& nodes,
                   step_manager& steps, resize_manager& resizes, faucets_gate& gate, access_view& view,
                   job_watchers& watchers, final_hook ended)
    : sched_(sched),
      pipe_(pipe),
      intake_(intake),
      nodes_(nodes),
      steps_(steps),
      resizes_(resizes),
      gate_(gate),
      view_(view),
      watchers_(watchers),
      ended_(std::move(ended)) {}

void launcher::launch(std::int64_t id, const core::processor_set& procs) {
  job_entry* found = jobs().find(id);
  if (found == nullptr) return;
  if (found->faucets && gate_.checks_starts() && !found->cancel_requested) {
    // The server must know it starts before it does: else, were this
    // cluster cut off now, the server could place it elsewhere too.
    // (A recovered job that its node never got is launched again here: it
    // already has a host, so the ask's number, not the host, tells answers
    // apart.)
    const std::uint64_t ask = ++found->faucets_start_ask;
    gate_.check_start(id, found->submit_token, [this, id, ask](bool ok) {
      pipe_.post([this, id, ok, ask] {
        const core::job* j = sched_.find(static_cast<core::job_id>(id));
        job_entry* e = jobs().find(id);
        if (j == nullptr || e == nullptr || !core::holds_processors(j->state) || e->faucets_start_ask != ask) return;
        if (ok || e->cancel_requested) {
          launch_checked(id, j->procs);
        } else {
          faucets_not_started(id);
        }
      });
    });
    return;
  }
  launch_checked(id, procs);
}

void launcher::faucets_not_started(std::int64_t id) {
  job_entry* e = jobs().find(id);
  if (e == nullptr) return;
  logging::warn("job {}: not started, its Faucets server did not confirm the start; it waits for the server", id);
  sched_.apply(core::event::on_job(core::event::kind::requeue, static_cast<core::job_id>(id)));
  pipe_.transition(id, core::job_state::pending, std::nullopt, "not started: the Faucets server did not confirm it");
  drop_instance(id, *e);
  pipe_.after_commit([this, id] { watchers_.notify(id, core::job_state::pending, std::nullopt, std::nullopt, nullptr); });
  // Behind the gate until the server lists it (follow) or releases it.
  gate_.hold_back(id);
  pipe_.decide();
}

void launcher::launch_checked(std::int64_t id, const core::processor_set& procs) {
  job_entry* found = jobs().find(id);
  if (found == nullptr) return;
  job_entry& e = *found;
  if (e.cancel_requested) {
    // Cancelled between the decision and its commit: never start it.
    end_job(id, job_state::cancelled, std::nullopt, std::nullopt, "cancelled before it started");
    return;
  }
  e.host = sched_.machine().node_of(procs.first());
  e.launch_confirmed = false;
  e.misses = 0;
  if (e.token.empty()) {
    // Prefixed with the cluster id: the agent refuses a launch whose token
    // names another cluster than the one it registered with.
    e.token = cluster_id_ + "." + protocol::make_nonce();
    view_.set_token(id, e.token);
  }
  refresh_job_addresses(id, procs, e.req.adaptive);
  if (e.spec) {
    protocol::job_spec spec = std::move(*e.spec);
    e.spec.reset();  // pending jobs only keep their scripts in memory
    send_launch(id, procs, std::move(spec));
    return;
  }
  // Recovered or requeued: the script comes from the store again.
  pipe_.on_readers([this, id, procs] {
    std::optional<store::job_record> rec;
    try {
      rec = pipe_.store().get_job(id);
    } catch (const std::exception& ex) {
      logging::warn("job {}: cannot read it to launch it: {}", id, ex.what());
    }
    pipe_.post([this, id, procs, rec] {
      const core::job* j = sched_.find(static_cast<core::job_id>(id));
      if (j == nullptr || !core::holds_processors(j->state)) return;
      if (!rec) {
        end_job(id, job_state::failed, std::nullopt, std::nullopt, "its record could not be read to launch it");
        return;
      }
      if (job_entry* e = jobs().find(id)) e->gid = rec->request.gid;
      send_launch(id, procs, to_spec(*rec));
    });
  });
}

void launcher::send_launch(std::int64_t id, const core::processor_set& procs, protocol::job_spec spec) {
  job_entry& e = jobs().at(id);
  const std::size_t host = *e.host;
  spec.interactive = e.interactive;
  // SLURM_JOB_PARTITION: the partition it runs in, of those it named.
  const core::job* placed = sched_.find(static_cast<core::job_id>(id));
  if (spec.geometry && placed != nullptr && placed->partition < sched_.partitions().size()) {
    spec.geometry->partition = sched_.partitions()[placed->partition].name;
  }
  protocol::launch l;
  l.id = nodes_.new_request_id();
  l.job_id = id;
  l.job = std::move(spec);
  l.user = e.user;
  l.uid = e.uid;
  l.gid = e.gid;
  l.procs = procs.to_string();
  l.nprocs = static_cast<std::int64_t>(procs.count());
  l.local_cpus = node_registry::local_cpus(nodes_.at(host), procs);
  l.nodelist = core::format_processor_map(spans(), procs);
  l.job_token = e.token;
  nodes_.fill_placement(procs, l.proc_hosts, l.proc_cpus);
  if (l.job.adaptive && !l.proc_hosts.empty()) l.spare_hosts = nodes_.spare_hosts(procs);
  nodes_.launch_sent(l.id, id);
  nodes_.send(host, std::move(l));
}

void launcher::handle_job_started(const conn_ptr& c, const protocol::job_started& m) {
  const node_entry* n = nodes_.heard(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  job_entry* e = jobs().find(m.job_id);
  if (e != nullptr && e->host == n->index) {
    e->launch_confirmed = true;
    e->misses = 0;
  }
  c->send(protocol::ok{m.id, {}});
}

void launcher::handle_agent_reply(const conn_ptr& c, const protocol::message& m) {
  const node_entry* n = nodes_.heard(*c);
  if (n == nullptr) return;
  const auto rid = protocol::id_of(m);
  if (!rid) return;
  if (steps_.launch_answered(*n, *rid, m)) return;
  const auto launched = nodes_.launch_answered(*rid);
  if (!launched) return;  // a kill's answer: nothing to do
  const std::int64_t id = *launched;
  job_entry* e = jobs().find(id);
  if (e == nullptr || e->host != n->index) return;
  if (const auto* err = std::get_if<protocol::error>(&m)) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !core::holds_processors(j->state)) return;
    logging::warn("job {} could not start on {}: {}", id, n->name, err->message);
    end_job(id, job_state::failed, std::nullopt, std::nullopt, "could not start on " + n->name + ": " + err->message);
  } else {
    e->launch_confirmed = true;
  }
}

void launcher::handle_job_exited(const conn_ptr& c, const protocol::job_exited& m) {
  const node_entry* n = nodes_.heard(*c);
  if (n == nullptr) return reply_error(c, m.id, protocol::error_code::invalid_state, "register first");
  const core::job* j = sched_.find(static_cast<core::job_id>(m.job_id));
  const job_entry* e = jobs().find(m.job_id);
  if (steps_.exited(*n, m)) {
    record_measurement(n->name, m);
    if (m.state == job_state::out_of_memory && e != nullptr) {
      jobs().find(m.job_id)->step_oom =
          "memory limit exceeded on " + n->name + " (a step)" + (m.reason ? ": " + *m.reason : std::string());
    }
    c->send(protocol::ok{m.id, {}});
    return;
  }
  if (j == nullptr || !core::holds_processors(j->state) || e == nullptr || e->host != n->index) {
    // An instance we no longer count on (ended by a node failure, requeued,
    // or reported twice): acknowledge so the agent forgets it.
    c->send(protocol::ok{m.id, {}});
    return;
  }
  if (e->requeue_by && !e->cancel_requested) {
    requeued(m.job_id);
    pipe_.after_commit([c, id = m.id] { c->send(protocol::ok{id, {}}); });
    return;
  }
  record_measurement(n->name, m);
  std::optional<std::int32_t> code, sig;
  if (m.exit_code) code = static_cast<std::int32_t>(*m.exit_code);
  if (m.signal) sig = static_cast<std::int32_t>(*m.signal);
  std::string reason = "exited on " + n->name;
  if (m.state == job_state::timeout) reason = "time limit reached";
  if (m.state == job_state::cancelled) reason = "cancelled";
  if (m.state == job_state::out_of_memory) reason = "memory limit exceeded on " + n->name;
  if (m.reason) reason += ": " + *m.reason;  // what the agent saw (the kernel's OOM kill)
  job_state state = m.state;
  if (e->step_oom && (state == job_state::completed || state == job_state::failed)) {
    state = job_state::out_of_memory;
    reason = *e->step_oom;
  }
  end_job(m.job_id, state, code, sig, reason);
  pipe_.after_commit([c, id = m.id] { c->send(protocol::ok{id, {}}); });
}

void launcher::record_measurement(const std::string& node, const protocol::job_exited& m) {
  // What the agent measured (issue 32), stored beside the job off the
  // strand; the job's end does not wait for it. Nothing measured: no row.
  if (!m.user_cpu_us || !m.system_cpu_us || !m.max_rss_kb) return;
  store::job_measurement r{m.job_id, node, *m.user_cpu_us, *m.system_cpu_us, *m.max_rss_kb};
  store::job_store& st = pipe_.store();
  pipe_.on_readers([&st, r] {
    try {
      st.record_measurement(r);
    } catch (const std::exception& e) {
      logging::warn("the measurement of job {} on {} could not be recorded: {}", r.job_id, r.node, e.what());
    }
  });
}

void launcher::end_job(std::int64_t id, job_state state, std::optional<std::int32_t> code,
                         std::optional<std::int32_t> signal, std::string reason) {
  sched_.apply(core::event::completion(static_cast<core::job_id>(id), state));
  pipe_.transition(id, state, std::nullopt, std::move(reason), code, signal);
  pipe_.after_commit([this, id, state, code, signal] { on_final(id, state, code, signal); });
  pipe_.decide();
}

void launcher::send_kill(std::int64_t id, int sig, std::chrono::seconds grace, bool escalate) {
  const job_entry* e = jobs().find(id);
  if (e == nullptr || !e->host) return;
  protocol::kill k;
  k.id = nodes_.new_request_id();
  k.job_id = id;
  k.signal = sig;
  k.grace_s = grace.count();
  k.escalate = escalate;  // fkill --signal: that signal only
  nodes_.send(*e->host, std::move(k));
}

void launcher::kill_uncertain(std::int64_t id, std::string reason) {
  send_kill(id, SIGKILL, std::chrono::seconds(0), true);
  end_job(id, job_state::failed, std::nullopt, SIGKILL, std::move(reason));
}

void launcher::signal_everywhere(std::int64_t id, int sig) {
  const job_entry* e = jobs().find(id);
  std::set<std::size_t> nodes;
  if (e != nullptr && e->host) nodes.insert(*e->host);
  if (const auto* sn = steps_.nodes_of(id)) nodes.insert(sn->begin(), sn->end());
  for (std::size_t n : nodes) {
    if (n < nodes_.size() && sched_.machine().at(n).state != core::node_state::down) {
      nodes_.send(n, protocol::kill{nodes_.new_request_id(), id, sig, 0, false});
    }
  }
}

void launcher::resumed(std::int64_t id, const core::processor_set& to, bool adaptive) {
  job_entry* e = jobs().find(id);
  if (e != nullptr) e->control.clear();
  view_.set_reason(id, "");
  pipe_.transition(id, job_state::running, to, "resumed on " + core::format_processor_map(spans(), to));
  if (adaptive) {
    // Its ranks are where they stopped: the new map moves them at the
    // next MPI_Migrate().
    refresh_job_addresses(id, to, true);
    resizes_.begin(id, to);
  }
  pipe_.after_commit([this, id, to] {
    signal_everywhere(id, SIGCONT);
    watchers_.notify(id, job_state::running, std::nullopt, std::nullopt, &to);
  });
}

void launcher::requeued(std::int64_t id) {
  job_entry* e = jobs().find(id);
  if (e == nullptr) return;
  const std::string by = e->requeue_by.value_or("root");
  e->requeue_by.reset();
  sched_.apply(core::event::on_job(core::event::kind::requeue, static_cast<core::job_id>(id)));
  pipe_.transition(id, job_state::pending, std::nullopt, "requeued by " + by);
  drop_instance(id, *e);  // the killed instance can no longer speak for the job
  e->control.clear();
  view_.set_reason(id, "");
  pipe_.after_commit([this, id] { watchers_.notify(id, job_state::pending, std::nullopt, std::nullopt, nullptr); });
  pipe_.decide();
}

void launcher::drop_instance(std::int64_t id, job_entry& e) {
  e.host.reset();
  e.token.clear();
  view_.forget_instance(id);
  e.launch_confirmed = false;
  e.misses = 0;
  e.step_oom.reset();
  resizes_.disarm(id);
}

void launcher::refresh_job_addresses(std::int64_t id, const core::processor_set& procs, bool adaptive) {
  std::set<std::string> addrs;
  auto add_node = [&](std::size_t index) {
    if (index < nodes_.size() && nodes_.at(index).conn) add_agent_address(nodes_.at(index).conn->peer(), addrs);
  };
  procs.for_each([&](std::size_t proc) { add_node(sched_.machine().node_of(proc)); });
  const job_entry* e = jobs().find(id);
  if (e != nullptr && e->host) add_node(*e->host);
  if (const auto* sn = steps_.nodes_of(id)) {
    for (std::size_t n : *sn) add_node(n);
  }
  if (adaptive) addrs.insert(access_view::k_any_agent);  // any host with an agent: it may grow there
  view_.set_job_addresses(id, std::move(addrs));
}

void launcher::refresh_spans() {
  view_.set_spans(nodes_.spans());
  view_.set_machine(sched_.machine(), sched_.resources());
}

// ---- node_jobs: what agents say of the jobs they run ----------------------

std::vector<std::int64_t> launcher::adopt_running(std::size_t index, const std::vector<std::int64_t>& running) {
  std::vector<std::int64_t> kill;
  for (std::int64_t r : running) {
    job_entry* e = jobs().find(r);
    const core::job* j = sched_.find(static_cast<core::job_id>(r));
    if (e != nullptr && j != nullptr && core::holds_processors(j->state) && e->host == index) {
      e->launch_confirmed = true;
      e->recovered = false;
      e->misses = 0;
    } else if (steps_.runs(r, index)) {
      // A step of the job (remote_exec) that outlived a reconnect.
    } else {
      kill.push_back(r);
    }
  }
  // A launch sent here that the agent never confirmed went with its old
  // connection if the agent does not list the job now: the next heartbeat
  // launches it again unless it lists it by then (a repeated launch of a job
  // it runs is only acknowledged).
  for (const auto& [end, held] : sched_.holding_by_end()) {
    const auto id = static_cast<std::int64_t>(held);
    job_entry* e = jobs().find(id);
    if (e == nullptr || e->host != index || e->launch_confirmed) continue;
    if (std::find(running.begin(), running.end(), id) == running.end()) e->recovered = true;
  }
  return kill;
}

bool launcher::still_wanted(std::size_t index, const protocol::message& queued) {
  const auto* l = std::get_if<protocol::launch>(&queued);
  if (l == nullptr) return true;
  const core::job* j = sched_.find(static_cast<core::job_id>(l->job_id));
  const job_entry* e = jobs().find(l->job_id);
  return j != nullptr && core::holds_processors(j->state) && e != nullptr && e->host == index;
}

void launcher::jobs_reported(std::size_t index, const std::vector<std::int64_t>& running) {
  const node_entry& n = nodes_.at(index);
  // A job its agent confirmed and no longer lists, twice, with no report of
  // its end: lost (its agent died with it and came back without it).
  std::vector<std::int64_t> lost, relaunch;
  // Only jobs holding processors can run here: walking every live job (a
  // queue of 100,000) on each heartbeat of each node starved submissions.
  for (const auto& [end, held] : sched_.holding_by_end()) {
    const auto id = static_cast<std::int64_t>(held);
    job_entry* found = jobs().find(id);
    if (found == nullptr) continue;
    job_entry& e = *found;
    if (e.host != index) continue;
    if (e.recovered) {
      // Registration and the resent reports came before this heartbeat.
      e.recovered = false;
      if (std::find(running.begin(), running.end(), id) == running.end()) relaunch.push_back(id);
      continue;
    }
    if (!e.launch_confirmed) continue;
    if (std::find(running.begin(), running.end(), id) != running.end()) {
      e.misses = 0;
    } else if (++e.misses >= 2) {
      lost.push_back(id);
    }
  }
  for (std::int64_t id : relaunch) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !core::holds_processors(j->state)) continue;
    logging::info("job {}: node {} never got its launch (aqsd or the agent's connection stopped first): launching it now", id, n.name);
    launch(id, j->procs);
  }
  for (std::int64_t id : lost) {
    const core::job* j = sched_.find(static_cast<core::job_id>(id));
    if (j == nullptr || !core::holds_processors(j->state)) continue;
    logging::warn("job {} is lost: node {} no longer runs it and never reported its end", id, n.name);
    end_job(id, job_state::failed, std::nullopt, std::nullopt, "lost: node " + n.name + " no longer runs it");
  }
}

}  // namespace aqs::daemon
