// user_api: the users' routes, their answers, and the users' port.
#include "server/user_api.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include <pqxx/except>

#include "cluster_link/tls.hpp"
#include "logging/log.hpp"
#include "protocol/json_limits.hpp"
#include "server/listener.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using nlohmann::json;

const std::vector<user_route>& user_routes() {
  using k = user_route_kind;
  static const std::vector<user_route> all = {
      {"GET", "/", false, false, k::overview},
      {"GET", "/api/v1/clusters", true, false, k::clusters},
      {"GET", "/api/v1/jobs", true, false, k::list_jobs},
      {"POST", "/api/v1/jobs", true, true, k::submit},
      {"GET", "/api/v1/jobs/{id}", true, false, k::job},
      {"GET", "/api/v1/jobs/{id}/history", true, false, k::history},
      {"POST", "/api/v1/jobs/{id}/cancel", true, false, k::cancel},
      {"GET", "/api/v1/ledger", true, false, k::ledger},
      // The browser's (issue 35): a job's page (its data come from the API
      // with the token), a quote before submitting, a placed job's values and
      // output asked of the cluster that runs it.
      {"GET", "/jobs/{id}", false, false, k::job_page},
      {"POST", "/api/v1/quote", true, true, k::quote},
      {"GET", "/api/v1/jobs/{id}/values", true, false, k::values},
      {"GET", "/api/v1/jobs/{id}/output", true, false, k::output},
      {"GET", "/api/v1/jobs/{id}/outputs", true, false, k::outputs},  // staged files back (fjobs -M --fetch)
  };
  return all;
}

namespace {

constexpr std::string_view k_api_prefix = "/api/v1/";

api_response reply(unsigned status, const json& body) {
  api_response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::server, "faucetsd");
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::cache_control, "no-store");
  res.body() = body.dump() + "\n";
  if (status == 401) res.set(bhttp::field::www_authenticate, "Bearer realm=\"faucetsd\"");
  res.prepare_payload();
  return res;
}

constexpr const char* k_overview = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Faucets</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}th{background:#f4f4f4}
.UP{color:#080}.UNREACHABLE{color:#b00}.err{color:#b00}fieldset{margin-bottom:1em;max-width:60em}
label{display:inline-block;margin:3px 12px 3px 0}pre{background:#f6f6f6;padding:8px;max-height:30em;overflow:auto}
svg{border:1px solid #ddd;margin:4px 12px 4px 0}</style></head><body>
<h1><a href="/">Faucets server</a></h1>
<p><label>Token <input id="token" type="password" size="60" placeholder="ftoken --socket .../faucetsd.sock"></label>
<button id="go">Show</button> <span id="msg" class="err"></span></p>
<div id="overview">
<h2>Submit a job</h2>
<form id="submit-form"><fieldset><legend>Job</legend>
<label>Name <input id="f-name" value="web-job"></label>
<label>Working directory <input id="f-workdir" size="40" placeholder="/home/you"></label><br>
<label>Script or command<br><textarea id="f-script" rows="4" cols="70" placeholder="#!/bin/sh&#10;echo hello"></textarea></label><br>
<label>Processors <input id="f-procs" type="number" value="1"></label>
<label>Adaptive: min <input id="f-min" type="number" size="4"></label>
<label>max <input id="f-max" type="number" size="4"></label>
<label>Time limit (minutes) <input id="f-time" type="number" value="10"></label>
<label>Cluster <select id="f-cluster"><option value="auto">auto (the server's policy)</option></select></label><br>
<label>Files to send with it (staged into its own directory there) <input id="f-files" type="file" multiple></label>
</fieldset><fieldset><legend>Contract (optional)</legend>
<label>Deadline <input id="f-deadline" type="datetime-local"></label>
<label>Max price <input id="f-price" type="number" step="any"></label>
<label>Value <input id="f-value" type="number" step="any"></label>
<label><input id="f-best" type="checkbox"> best effort</label>
</fieldset>
<button type="button" id="quote-btn">When would it start?</button> <button type="submit" id="submit-btn">Submit</button>
<span id="form-msg" class="err"></span></form>
<table id="quote"><thead><tr><th>cluster</th><th>state</th><th>would start in (s)</th><th>done in (s)</th>
<th>price</th><th>note</th></tr></thead><tbody></tbody></table>
<h2>Clusters</h2><table id="clusters"><thead><tr><th>cluster</th><th>state</th><th>processors free/total</th>
<th>shrinkable</th><th>queued</th><th>speed</th><th>latency ms</th><th>bandwidth Mbit/s</th></tr></thead><tbody></tbody></table>
<h2>Jobs</h2><table id="jobs"><thead><tr><th>id</th><th>global id</th><th>cluster</th><th>user</th><th>name</th>
<th>state</th><th>processors</th><th>submitted</th></tr></thead><tbody></tbody></table>
</div>
<div id="job" hidden>
<h2>Job <span id="job-id"></span>: <span id="job-name"></span></h2>
<p>Cluster <b id="job-cluster"></b> (its id there <span id="job-local"></span>), state <b id="job-state"></b>,
processors <span id="job-procs"></span>, exit code <span id="job-exit"></span></p>
<h3>History</h3><table id="history"><thead><tr><th>time</th><th>event</th><th>detail</th></tr></thead><tbody></tbody></table>
<h3>Output (its tail)</h3><pre id="output"></pre><span id="output-msg" class="err"></span>
<h3>Published values</h3><div id="charts"></div><span id="values-msg" class="err"></span>
<div id="outputs-box" hidden><h3>Its files (staged in, and what it left)</h3><p id="outputs-state"></p><ul id="outputs"></ul></div>
</div>
<script>
const $ = (s) => document.querySelector(s);
const cell = (tr, text, cls) => { const td = tr.insertCell(); td.textContent = text ?? ''; if (cls) td.className = cls; };
async function call(method, path, body) {
  const init = {method, headers: {Authorization: 'Bearer ' + $('#token').value.trim()}};
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
  const r = await fetch(path, init);
  const text = await r.text();
  let parsed; try { parsed = JSON.parse(text); } catch { parsed = {error: text}; }
  if (!r.ok) throw new Error(parsed.error || r.statusText);
  return parsed;
}
const get = (path) => call('GET', path);
const jobPage = location.pathname.match(/^\/jobs\/(\d+)$/);
// A file as staged files travel (protocol/staged_files.hpp): its name, mode and base64 data.
async function staged(f) {
  const bytes = new Uint8Array(await f.arrayBuffer());
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return {path: f.name, mode: 0o644, data: btoa(bin)};
}
// The form as POST /api/v1/jobs takes it; a bad number is the server's to refuse, in one line.
async function formBody() {
  const num = (id) => $(id).value.trim() === '' ? undefined : Number($(id).value);
  let text = $('#f-script').value;
  if (!text.startsWith('#!')) text = '#!/bin/sh\n' + text + '\n';
  const job = {name: $('#f-name').value.trim() || 'web-job', script: text, workdir: $('#f-workdir').value.trim()};
  const lo = num('#f-min'), hi = num('#f-max');
  if (lo !== undefined || hi !== undefined) {
    job.min_pe = lo ?? hi; job.max_pe = hi ?? lo; job.adaptive = job.min_pe !== job.max_pe;
  } else {
    job.min_pe = job.max_pe = num('#f-procs') ?? 1;
  }
  const minutes = num('#f-time');
  if (minutes !== undefined) job.walltime_s = Math.round(minutes * 60);
  const body = {cluster: $('#f-cluster').value, job};
  const files = [...$('#f-files').files];
  if (files.length) body.stage_in = await Promise.all(files.map(staged));
  if ($('#f-deadline').value || num('#f-price') !== undefined || num('#f-value') !== undefined) {
    const when = $('#f-deadline').value ? new Date($('#f-deadline').value).getTime() / 1000 : 0;
    body.contract = {deadline: when, max_price: num('#f-price') ?? 0, value: num('#f-value') ?? 0,
                     best_effort: $('#f-best').checked};
  }
  return body;
}
async function quote() {
  $('#form-msg').textContent = '';
  const tb = $('#quote tbody'); tb.replaceChildren();
  try {
    const q = await call('POST', '/api/v1/quote', await formBody());
    for (const c of q.clusters) {
      const tr = tb.insertRow(); tr.dataset.cluster = c.name;
      const r = (x) => x === null ? '' : Number(x).toFixed(1);
      cell(tr, c.name); cell(tr, c.state, c.state); cell(tr, r(c.start_in_s)); cell(tr, r(c.completion_in_s));
      cell(tr, c.price === null ? '' : Number(c.price).toFixed(3)); cell(tr, c.why || '');
    }
  } catch (e) { $('#form-msg').textContent = e.message; }
}
async function submit(ev) {
  ev.preventDefault();
  $('#form-msg').textContent = '';
  try {
    const r = await call('POST', '/api/v1/jobs', await formBody());
    location.href = '/jobs/' + r.id;
  } catch (e) { $('#form-msg').textContent = e.message; }
}
async function refresh() {
  try {
    const [c, j] = await Promise.all([get('/api/v1/clusters'), get('/api/v1/jobs?all=1')]);
    const cb = $('#clusters tbody'); cb.replaceChildren();
    const sel = $('#f-cluster'); const chosen = sel.value;
    for (const o of [...sel.options]) if (o.value !== 'auto') o.remove();
    for (const x of c.clusters) {
      const tr = cb.insertRow(); const r = x.report || {};
      cell(tr, x.name); cell(tr, x.state, x.state);
      cell(tr, r.procs_total === undefined ? '' : r.procs_free + '/' + r.procs_total);
      cell(tr, r.shrinkable); cell(tr, r.pending_jobs); cell(tr, r.speed);
      cell(tr, x.latency_ms.toFixed(2)); cell(tr, x.bandwidth_mbps.toFixed(0));
      sel.add(new Option(x.name, x.name));
    }
    sel.value = chosen || 'auto';
    if (sel.value === '') sel.value = 'auto';  // the chosen cluster left the server's list
    const jb = $('#jobs tbody'); jb.replaceChildren();
    for (const x of j.jobs) {
      const tr = jb.insertRow();
      const td = tr.insertCell(); const a = document.createElement('a'); a.href = '/jobs/' + x.id; a.textContent = x.id;
      td.append(a);
      cell(tr, x.gid); cell(tr, x.cluster); cell(tr, x.user); cell(tr, x.name);
      cell(tr, x.state); cell(tr, x.nprocs); cell(tr, x.submit_time);
    }
    $('#msg').textContent = '';
  } catch (e) { $('#msg').textContent = e.message; }
}
function chart(name, points) {
  const w = 360, h = 120, ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg'); svg.setAttribute('width', w); svg.setAttribute('height', h);
  svg.dataset.series = name;
  const ts = points.map((p) => p[0]), vs = points.map((p) => p[1]);
  const t0 = Math.min(...ts), t1 = Math.max(...ts), v0 = Math.min(...vs), v1 = Math.max(...vs);
  const x = (t) => 30 + (t1 > t0 ? (t - t0) / (t1 - t0) : 0.5) * (w - 40);
  const y = (v) => h - 20 - (v1 > v0 ? (v - v0) / (v1 - v0) : 0.5) * (h - 40);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', points.map((p) => x(p[0]) + ',' + y(p[1])).join(' '));
  line.setAttribute('fill', 'none'); line.setAttribute('stroke', '#06c');
  const label = document.createElementNS(ns, 'text'); label.setAttribute('x', 4); label.setAttribute('y', 14);
  label.textContent = name + ': ' + (vs.length ? vs[vs.length - 1] : '');
  svg.append(line, label);
  return svg;
}
async function refreshJob(id) {
  try {
    const h = await get('/api/v1/jobs/' + id + '/history');
    const j = h.job;
    $('#job-id').textContent = j.id; $('#job-name').textContent = j.name; $('#job-cluster').textContent = j.cluster ?? '(not placed yet)';
    $('#job-local').textContent = j.local_id ?? ''; $('#job-state').textContent = j.state;
    $('#job-procs').textContent = j.nprocs; $('#job-exit').textContent = j.exit_code ?? '';
    const tb = $('#history tbody'); tb.replaceChildren();
    for (const e of h.events) { const tr = tb.insertRow(); cell(tr, e.time); cell(tr, e.event); cell(tr, e.detail); }
    $('#msg').textContent = '';
    if (j.cluster) {
      try { const o = await get('/api/v1/jobs/' + id + '/output?bytes=8192'); $('#output').textContent = o.output; $('#output-msg').textContent = ''; }
      catch (e) { $('#output-msg').textContent = e.message; }
      try {
        const v = await get('/api/v1/jobs/' + id + '/values');
        const box = $('#charts'); box.replaceChildren();
        for (const [name, s] of Object.entries((v.values || {}).series || {})) box.append(chart(name, s.points));
        $('#values-msg').textContent = '';
      } catch (e) { $('#values-msg').textContent = e.message; }
      await refreshOutputs(id);
    }
  } catch (e) { $('#msg').textContent = e.message; }
}
// A job that staged files: its directory's files once back (fjobs -M --fetch), each a download.
async function refreshOutputs(id) {
  let o;
  try { o = await get('/api/v1/jobs/' + id + '/outputs'); } catch (e) { return; }  // staged nothing
  $('#outputs-box').hidden = false;
  $('#outputs-state').textContent = o.outputs === 'back' ? 'back from its cluster' :
    o.outputs === 'failed' ? 'did not come back: ' + o.detail : 'not back yet (they come when it ends)';
  const ul = $('#outputs');
  if (ul.dataset.shown === o.outputs) return;
  ul.dataset.shown = o.outputs; ul.replaceChildren();
  for (const f of o.files || []) {
    const bin = atob(f.data), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; ++i) bytes[i] = bin.charCodeAt(i);
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([bytes])); a.download = f.path.split('/').pop(); a.textContent = f.path;
    a.dataset.size = bytes.length;
    const li = document.createElement('li'); li.append(a, ' (' + bytes.length + ' bytes)'); ul.append(li);
  }
}
function tick() { if (jobPage) refreshJob(jobPage[1]); else refresh(); }
$('#go').onclick = () => { localStorage.faucetsToken = $('#token').value; tick(); };
$('#quote-btn').onclick = quote;
$('#submit-form').onsubmit = submit;
$('#token').value = localStorage.faucetsToken || '';
if (jobPage) { $('#overview').hidden = true; $('#job').hidden = false; }
setInterval(tick, 2000); tick();
</script></body></html>
)html";

// A job id of the path: digits only, at most 15.
std::optional<std::int64_t> number_of(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  std::int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

// "/api/v1/jobs/{id}/history" against "/api/v1/jobs/42/history".
bool path_matches(std::string_view pattern, std::string_view path, std::int64_t& id) {
  const auto brace = pattern.find("{id}");
  if (brace == std::string_view::npos) return pattern == path;
  if (path.substr(0, brace) != pattern.substr(0, brace)) return false;
  const std::string_view tail = pattern.substr(brace + 4);
  path.remove_prefix(brace);
  if (path.size() < tail.size() || path.substr(path.size() - tail.size()) != tail) return false;
  const auto n = number_of(path.substr(0, path.size() - tail.size()));
  if (!n) return false;
  id = *n;
  return true;
}

std::map<std::string, std::string> query_of(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    const auto amp = q.find('&');
    const std::string_view part = q.substr(0, amp);
    const auto eq = part.find('=');
    out[std::string(part.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

api_response overview_page() {
  api_response res{bhttp::status::ok, 11};
  res.set(bhttp::field::content_type, "text/html; charset=utf-8");
  res.set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'");
  res.body() = k_overview;
  res.prepare_payload();
  return res;
}

api_response list_jobs(user_backend& b, const user_call& call, std::string_view query_text, bool admin) {
  const auto query = query_of(query_text);
  const bool all = query.contains("all") && query.at("all") != "0";
  std::optional<std::string> cluster;
  if (query.contains("cluster") && !query.at("cluster").empty() && query.at("cluster") != "all") {
    cluster = query.at("cluster");
  }
  json jobs = json::array();
  for (const auto& j : b.jobs(admin ? std::nullopt : std::optional<std::string>(call.who->user), all, cluster)) {
    jobs.push_back(to_json(j));
  }
  return reply(200, json{{"jobs", jobs}});
}

api_response submit(user_backend& b, const user_call& call, const api_request& req) {
  json body;
  try {
    body = protocol::parse_json_bounded(req.body());
  } catch (const std::exception& e) {
    return error_reply(400, std::string("the body is not JSON: ") + e.what());
  }
  if (!body.is_object() || !body.contains("job") || !body["job"].is_object()) {
    return error_reply(400, "the body must be {\"cluster\": \"auto\"|NAME, \"job\": {...}}");
  }
  const std::string cluster = body.value("cluster", std::string("auto"));
  json message{{"type", "submit"}, {"id", 1}, {"job", body["job"]}};
  if (body.contains("datasets")) message["datasets"] = body["datasets"];
  if (body.contains("broker")) message["broker"] = body["broker"];  // a plugin by name, where the admin allows it
  // The QoS contract (docs/faucets.md "Contracts"): checked by the router, kept at the server.
  if (body.contains("contract")) message["contract"] = body["contract"];
  // Staged files (fsub -M --stage-in): checked by the router, kept at the server.
  if (body.contains("stage_in")) message["stage_in"] = body["stage_in"];
  std::string why;
  const std::int64_t id = b.submit(call.who->user, cluster, std::move(message), &why);
  if (id == 0) return error_reply(400, why);
  return reply(201, json{{"id", id}, {"gid", nullptr}, {"cluster", nullptr}, {"state", "PENDING"}});
}

// GET /api/v1/ledger[?owner=NAME][&limit=N]: every owner's balance (anyone
// with a token: what the clusters' owners owe each other is the market's
// public state), and the entries: root's every one, a user's only those of
// their own jobs.
api_response ledger(user_backend& b, const user_call& call, std::string_view query_text, bool admin) {
  const auto query = query_of(query_text);
  std::optional<std::string> owner;
  if (query.contains("owner") && !query.at("owner").empty()) owner = query.at("owner");
  std::int64_t limit = 1000;
  if (query.contains("limit")) {
    const auto n = number_of(query.at("limit"));
    if (!n || *n < 1 || *n > 100000) return error_reply(400, "limit must be a number in 1..100000");
    limit = *n;
  }
  json balances = json::object();
  std::int64_t total = 0;
  for (const auto& [who, micro] : b.balances()) {
    balances[who] = json{{"balance", static_cast<double>(micro) / k_micro}, {"balance_micro", micro}};
    total += micro;
  }
  json entries = json::array();
  for (const auto& e : b.ledger_entries(owner, limit)) {
    if (!admin && e.user != call.who->user) continue;
    entries.push_back(to_json(e));
  }
  return reply(200, json{{"balances", balances}, {"total_micro", total}, {"entries", entries}});
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

api_response error_reply(unsigned status, const std::string& message) { return reply(status, json{{"error", message}}); }

user_route_match match_user_route(std::string_view method, std::string_view path) {
  user_route_match m;
  for (const user_route& r : user_routes()) {
    std::int64_t id = 0;
    if (!path_matches(r.path, path, id)) continue;
    m.path_known = true;
    m.allow += (m.allow.empty() ? "" : ", ") + std::string(r.method);
    if (r.method == method) {
      m.route = &r;
      m.id = id;
    }
  }
  return m;
}

std::variant<api_response, user_call> authorize(const daemon::token_authority& tokens,
                                                const bhttp::request_header<>& head, std::int64_t now_us) {
  const std::string_view target(head.target().data(), head.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const std::string_view method(head.method_string().data(), head.method_string().size());
  const auto m = match_user_route(method, path);
  const std::string what = std::string(method) + " " + std::string(path);
  // Outside the API, an unknown path is answered at once; inside, only a
  // token's holder learns which paths exist.
  const bool needs_token = m.route ? m.route->token : path.starts_with(k_api_prefix);
  if (!needs_token && !m.path_known) return error_reply(404, "no such route: " + what);
  user_call call{m.route, m.id, std::nullopt};
  if (needs_token) {
    const auto auth = head.find(bhttp::field::authorization);
    if (auth == head.end()) return error_reply(401, "no bearer token (get one with ftoken --socket FAUCETSD_SOCKET)");
    const std::string_view value(auth->value().data(), auth->value().size());
    if (!value.starts_with("Bearer ")) return error_reply(401, "the Authorization header must be \"Bearer TOKEN\"");
    auto verdict = tokens.verify(value.substr(7), now_us);
    if (const auto* why = std::get_if<std::string>(&verdict)) return error_reply(401, "token refused: " + *why);
    call.who = std::move(std::get<daemon::token_claims>(verdict));
  }
  if (!m.path_known) return error_reply(404, "no such route: " + what);
  if (m.route == nullptr) {
    auto res = error_reply(405, std::string(method) + " is not allowed on " + std::string(path) + " (allowed: " +
                                    m.allow + ")");
    res.set(bhttp::field::allow, m.allow);
    return res;
  }
  return call;
}

api_response answer(user_backend& b, const user_call& call, const api_request& req) {
  const std::string_view target(req.target().data(), req.target().size());
  const auto qmark = target.find('?');
  const std::string_view query = qmark == std::string_view::npos ? std::string_view{} : target.substr(qmark + 1);
  const bool admin = call.who && call.who->uid == 0;
  std::optional<stored_job> job;
  if (call.route->token && call.route->path.find("{id}") != std::string_view::npos) {
    job = b.job(call.id);
    // Someone else's job is as absent as a missing one.
    if (!job || (!admin && job->owner != call.who->user)) return error_reply(404, "no job " + std::to_string(call.id));
  }
  switch (call.route->kind) {
    case user_route_kind::overview:
      return overview_page();
    case user_route_kind::clusters:
      return reply(200, b.clusters());
    case user_route_kind::list_jobs:
      return list_jobs(b, call, query, admin);
    case user_route_kind::submit:
      return submit(b, call, req);
    case user_route_kind::job:
      return reply(200, to_json(*job));
    case user_route_kind::history: {
      json events = json::array();
      for (const auto& e : b.history(call.id)) {
        events.push_back(json{{"time", e.time}, {"event", e.event}, {"detail", e.detail}});
      }
      return reply(200, json{{"job", to_json(*job)}, {"events", events}});
    }
    case user_route_kind::ledger:
      return ledger(b, call, query, admin);
    case user_route_kind::job_page:
      return overview_page();
    case user_route_kind::quote:
    case user_route_kind::values:
    case user_route_kind::output:
      return error_reply(500, "this route is answered asynchronously");
    case user_route_kind::cancel:
      if (auto why = b.cancel(*job)) return error_reply(409, *why);
      logging::info("job {} cancelled by {}", call.id, call.who->user);
      return reply(200, json{{"id", call.id}, {"state", "CANCELLED"}});
    case user_route_kind::outputs: {
      json o = b.staged_outputs(call.id);
      if (o.is_null()) return error_reply(404, "job " + std::to_string(call.id) + " staged no files");
      o["id"] = call.id;
      o["state"] = job->state;
      return reply(200, o);
    }
  }
  return error_reply(500, "a route without a handler");
}

asio::awaitable<api_response> answer_async(user_backend& b, user_call call, const api_request& req) {
  const auto kind = call.route->kind;
  if (kind != user_route_kind::quote && kind != user_route_kind::values && kind != user_route_kind::output) {
    co_return answer(b, call, req);
  }
  desk_answer a;
  if (kind == user_route_kind::quote) {
    json body;
    try {
      body = protocol::parse_json_bounded(req.body());
    } catch (const std::exception& e) {
      co_return error_reply(400, std::string("the body is not JSON: ") + e.what());
    }
    a = co_await b.quote(call.who->user, body);
    if (const auto* why = std::get_if<std::string>(&a)) co_return error_reply(400, *why);
    co_return reply(200, std::get<json>(a));
  }
  const bool admin = call.who->uid == 0;
  const auto job = b.job(call.id);
  // Someone else's job is as absent as a missing one.
  if (!job || (!admin && job->owner != call.who->user)) co_return error_reply(404, "no job " + std::to_string(call.id));
  const std::string_view target(req.target().data(), req.target().size());
  const auto qmark = target.find('?');
  const auto query = query_of(qmark == std::string_view::npos ? std::string_view{} : target.substr(qmark + 1));
  double since = 0;
  std::int64_t bytes = 4096;
  try {
    if (query.contains("since")) since = std::stod(query.at("since"));
    if (query.contains("bytes")) bytes = std::stoll(query.at("bytes"));
  } catch (const std::exception&) {
    co_return error_reply(400, "since must be a number (Unix seconds) and bytes a whole number");
  }
  if (!(since >= 0 && since < 1e11) || bytes < 1 || bytes > k_max_output_tail) {
    co_return error_reply(400, "since must be >= 0 and bytes from 1 to " + std::to_string(k_max_output_tail));
  }
  a = co_await b.view(*job, kind == user_route_kind::values ? "values" : "output", since, bytes);
  if (const auto* why = std::get_if<std::string>(&a)) co_return error_reply(409, *why);
  co_return reply(200, std::get<json>(a));
}

user_api::user_api(asio::io_context& io, user_api_options options, user_backend& backend,
                   const daemon::token_authority& tokens)
    : io_(io), options_(std::move(options)), backend_(backend), tokens_(tokens) {
  bodies_->cap = options_.limits.max_bodies_in_flight;
}

user_api::~user_api() = default;

void user_api::start() {
  acceptor_ = listen_on(io_, options_.listen, "--http");
  port_ = acceptor_->local_endpoint().port();
  if (options_.tls) {
    tls_ = server_tls(options_.cert, options_.key);
  } else if (!acceptor_->local_endpoint().address().is_loopback()) {
    throw std::runtime_error("--http " + options_.listen + " is not on loopback: give it a certificate (TLS)");
  }
  const auto& L = options_.limits;
  asio::co_spawn(io_,
                 accept_loop(*acceptor_, accept_caps{conns_, L.http_max_connections, L.http_max_per_address,
                                                     "users' port", "HTTP"},
                             [this](asio::ip::tcp::socket sock, conn_slot slot) { serve(std::move(sock), std::move(slot)); }),
                 asio::detached);
}

void user_api::stop() {
  asio::post(io_, [this] {
    boost::system::error_code ec;
    if (acceptor_) acceptor_->close(ec);
  });
}

void user_api::serve(asio::ip::tcp::socket sock, conn_slot slot) {
  if (tls_) {
    asio::co_spawn(
        io_,
        [this, s = std::move(sock), slot = std::move(slot)]() mutable -> asio::awaitable<void> {
          boost::system::error_code hec;
          {
            // No TLS state (some 80 KiB) for a peer that sends nothing.
            watchdog first(s);
            first.arm(options_.limits.handshake_timeout);
            co_await s.async_wait(asio::ip::tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, hec));
            if (hec || first.fired()) co_return;
          }
          asio::ssl::stream<asio::ip::tcp::socket> tls(std::move(s), *tls_);
          watchdog dog(tls.next_layer());
          dog.arm(options_.limits.handshake_timeout);
          co_await tls.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, hec));
          if (hec) co_return;
          co_await session(tls, slot, dog);
          if (!tls.next_layer().is_open()) co_return;
          dog.arm(options_.limits.handshake_timeout);
          co_await tls.async_shutdown(asio::redirect_error(asio::use_awaitable, hec));
        },
        asio::detached);
  } else {
    asio::co_spawn(
        io_,
        [this, s = std::move(sock), slot = std::move(slot)]() mutable -> asio::awaitable<void> {
          watchdog dog(s);
          co_await session(s, slot, dog);
          boost::system::error_code ignore;
          s.shutdown(asio::ip::tcp::socket::shutdown_both, ignore);
        },
        asio::detached);
  }
}

template <class Stream>
asio::awaitable<void> user_api::session(Stream& stream, conn_slot& slot, watchdog& dog) {
  const auto& L = options_.limits;
  const std::size_t largest_body = std::max(L.max_job_body, L.max_other_body);
  // Big enough for a whole head; a body streams through it.
  beast::flat_buffer buf(L.max_head + 4096);
  for (;;) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(L.max_head));
    // The route's own limit is set once the head is read; a declared length
    // over the largest any route takes fails the head.
    parser.body_limit(largest_body);
    boost::system::error_code ec;
    // From the connection's start (or the previous answer) to the end of
    // the head: a peer that sends nothing, or dribbles, is closed.
    dog.arm(L.head_timeout);
    co_await bhttp::async_read_header(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == bhttp::error::header_limit || ec == bhttp::error::body_limit) {
        auto res = ec == bhttp::error::header_limit
                       ? error_reply(431, "the request's head is over " + std::to_string(L.max_head) + " bytes")
                       : error_reply(413, "the body is over " + std::to_string(largest_body) +
                                              " bytes, the most any route takes");
        res.keep_alive(false);
        dog.arm(L.body_timeout);
        co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      }
      co_return;
    }
    // Decided from the head alone, before any of the body is read: the
    // route, who asks, the user's connection cap, how large a body the
    // route takes. An answer here ends the connection.
    std::optional<api_response> early;
    user_call call;
    if (auto verdict = authorize(tokens_, parser.get(), now_us()); auto* refusal = std::get_if<api_response>(&verdict)) {
      early = std::move(*refusal);
    } else {
      call = std::get<user_call>(std::move(verdict));
    }
    if (!early && call.who && !slot.rekey("user " + call.who->user, L.http_max_per_user)) {
      logging::warn("HTTP: user {} already holds {} connections (at most {}): one more refused", call.who->user,
                    L.http_max_per_user, L.http_max_per_user);
      early = error_reply(429, "user " + call.who->user + " already holds " + std::to_string(L.http_max_per_user) +
                                   " connections to faucetsd (at most that many): close some and retry");
    }
    const std::size_t limit = !early && call.route->job_body ? L.max_job_body : L.max_other_body;
    std::optional<body_reservation> reserved;
    if (!early && !parser.is_done()) {
      const auto declared = parser.content_length();
      if (declared && *declared > limit) {
        early = error_reply(413, "the body is " + std::to_string(*declared) + " bytes; this route takes at most " +
                                     std::to_string(limit));
      } else {
        reserved = body_reservation::take(bodies_, declared ? static_cast<std::size_t>(*declared) : limit);
        if (!reserved) {
          logging::warn("HTTP: {} bytes of request bodies are being read already: a body from {} waits", bodies_->in_use,
                        slot.key());
          early = error_reply(503, "faucetsd is reading too many request bodies at once; try again");
        }
      }
    }
    if (early) {
      // The body (if any) stays unread: the connection ends with the answer.
      early->keep_alive(false);
      dog.arm(L.body_timeout);
      co_await bhttp::async_write(stream, *early, asio::redirect_error(asio::use_awaitable, ec));
      co_return;
    }
    if (!parser.is_done()) {
      parser.body_limit(limit);
      if (beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
        bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
        co_await bhttp::async_write(stream, cont, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
      }
      dog.arm(L.body_timeout);
      co_await bhttp::async_read(stream, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == bhttp::error::body_limit) {
          auto res = error_reply(413, "the body is over " + std::to_string(limit) + " bytes, the most this route takes");
          res.keep_alive(false);
          co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return;
      }
    }
    dog.disarm();
    reserved.reset();
    api_request req = parser.release();
    api_response res;
    try {
      res = co_await answer_async(backend_, call, req);
    } catch (const pqxx::broken_connection& e) {
      // Nothing was changed: the request may be sent again.
      logging::warn("HTTP {} {}: the store is unavailable: {}", std::string(req.method_string()),
                    std::string(req.target()), e.what());
      res = error_reply(503, "the Faucets server's database is unavailable for a moment; try again");
    } catch (const std::exception& e) {
      logging::error("HTTP {} {}: {}", std::string(req.method_string()), std::string(req.target()), e.what());
      res = error_reply(500, std::string("internal error: ") + e.what());
    }
    res.keep_alive(req.keep_alive());
    // A peer that does not read its answer is closed too.
    dog.arm(L.body_timeout);
    co_await bhttp::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !req.keep_alive()) co_return;
  }
}

}  // namespace aqs::faucets
