// faucets_commands: fsub, fjobs and fkill through a Faucets server.
#include "faucets_client/faucets_commands.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include "client/format.hpp"
#include "faucets_client/stage_files.hpp"
#include "protocol/staged_files.hpp"
#include "cmdline/time_limit.hpp"
#include "protocol/messages.hpp"

namespace aqs::client {

namespace {

// A field as table text: strings as they are (control characters replaced),
// numbers, booleans; null or missing "-".
std::string cell(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "-";
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  std::string s;
  if (it->is_string()) {
    s = it->get<std::string>();
  } else if (it->is_number_integer()) {
    s = std::to_string(it->get<std::int64_t>());
  } else {
    s = it->dump();
  }
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return s.empty() ? "-" : s;
}

std::optional<std::int64_t> integer(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

std::optional<double> time_of(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return parse_iso8601(it->get_ref<const std::string&>());
}

// "2026-11-26T02:03:04.123Z" -> "2026-11-26T02:03:04".
std::string to_second(const std::string& iso) {
  if (iso.size() >= 19 && iso[10] == 'T' && parse_iso8601(iso)) return iso.substr(0, 19);
  return iso;
}

void write_line(std::FILE* f, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), f);
  std::fputc('\n', f);
}

}  // namespace

std::optional<double> parse_iso8601(std::string_view t) {
  auto num = [&](std::size_t pos, std::size_t n) -> std::optional<int> {
    if (pos + n > t.size()) return std::nullopt;
    int v = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
      if (t[i] < '0' || t[i] > '9') return std::nullopt;
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  if (t.size() < 19 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != ' ') || t[13] != ':' || t[16] != ':') {
    return std::nullopt;
  }
  const auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2), s = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !s || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *s > 60) {
    return std::nullopt;
  }
  std::size_t pos = 19;
  double fraction = 0;
  if (pos < t.size() && t[pos] == '.') {
    double scale = 0.1;
    ++pos;
    const std::size_t start = pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      fraction += (t[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  int offset_s = 0;
  if (pos < t.size()) {
    if (t[pos] == 'Z' && pos + 1 == t.size()) {
      ++pos;
    } else if ((t[pos] == '+' || t[pos] == '-') && t.size() == pos + 6 && t[pos + 3] == ':') {
      const auto oh = num(pos + 1, 2), om = num(pos + 4, 2);
      if (!oh || !om) return std::nullopt;
      offset_s = (*oh * 3600 + *om * 60) * (t[pos] == '+' ? 1 : -1);
      pos = t.size();
    } else {
      return std::nullopt;
    }
  }
  std::tm tm{};
  tm.tm_year = *y - 1900;
  tm.tm_mon = *mo - 1;
  tm.tm_mday = *d;
  tm.tm_hour = *h;
  tm.tm_min = *mi;
  tm.tm_sec = *s;
  return static_cast<double>(::timegm(&tm)) + fraction - offset_s;
}

std::string format_faucets_jobs_table(const nlohmann::json& jobs, double now) {
  std::vector<std::vector<std::string>> rows{
      {"ID", "GID", "CLUSTER", "USER", "NAME", "STATE", "NPROCS", "SUBMIT", "TIME"}};
  if (!jobs.is_array()) return render_table(rows);
  for (const auto& j : jobs) {
    std::string nprocs = cell(j, "nprocs");
    const auto n = integer(j, "nprocs");
    const auto lo = integer(j, "min_pe"), hi = integer(j, "max_pe");
    if ((!n || *n == 0) && lo && hi) nprocs = *lo == *hi ? std::to_string(*lo) : std::to_string(*lo) + "-" + std::to_string(*hi);
    std::string time = "-";
    if (const auto start = time_of(j, "start_time")) {
      const double secs = std::max(0.0, time_of(j, "end_time").value_or(now) - *start);
      time = secs < 1 ? "00:00:00" : cmdline::format_duration(static_cast<std::int64_t>(secs));
    }
    const std::string submit = cell(j, "submit_time");
    rows.push_back({cell(j, "id"), cell(j, "gid"), cell(j, "cluster"), cell(j, "user"), cell(j, "name"),
                    cell(j, "state"), nprocs, submit == "-" ? submit : to_second(submit), time});
  }
  return render_table(rows);
}

std::string format_faucets_history_table(const nlohmann::json& events) {
  std::vector<std::vector<std::string>> rows{{"TIME", "EVENT", "DETAIL"}};
  if (!events.is_array()) return render_table(rows);
  for (const auto& e : events) {
    const std::string t = cell(e, "time");
    rows.push_back({t == "-" ? t : to_second(t), cell(e, "event"), cell(e, "detail")});
  }
  return render_table(rows);
}

faucets::client faucets_client_for(const cmdline::faucets_options& o, const faucets::environment& env) {
  return faucets::client(faucets::resolve_client_options(o.url, o.ca_file, o.token_file, env));
}

int fsub_through_faucets(faucets::client& c, const cmdline::fsub_command_line& cmd, const cmdline::fsub_request& req,
                         std::FILE* out, std::FILE* err) {
  const std::string cluster = cmd.options.faucets.cluster.value_or("auto");
  // The job exactly as aqsd would get it in a submit message.
  const nlohmann::json message = protocol::to_json(protocol::message{req.request});
  const auto& k = cmd.options.faucets.contract;
  nlohmann::json contract = nullptr;
  if (k.given()) {
    contract = {{"deadline", *k.deadline}, {"max_price", *k.max_price}, {"value", *k.value},
                {"decay_s", k.decay_s.value_or(0.0)}, {"best_effort", k.best_effort}};
  }
  // Staged files: read (and checked) here, under the submit directory.
  nlohmann::json stage_in = nullptr;
  if (!cmd.options.faucets.stage_in.empty()) {
    try {
      stage_in = protocol::to_json(read_stage_in(std::filesystem::current_path(), cmd.options.faucets.stage_in,
                                                 protocol::k_max_stage_bytes));
    } catch (const stage_error& e) {
      write_line(err, std::string("fsub: ") + e.what());
      return 1;
    }
  }
  faucets::submitted s = c.submit(cluster, message.at("job"), cmd.options.faucets.broker, contract, stage_in);
  if (k.given()) {
    // The server asks the clusters for bids and awards the job, or refuses
    // it: the user hears which before fsub ends (up to 30 s).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      const nlohmann::json j = c.job(s.id);
      const std::string state = j.value("state", "");
      if (state == "FAILED") {
        std::string why = "refused";
        for (const auto& e : c.history(s.id)) {
          if (e.value("event", "") == "refused" || e.value("event", "") == "failed") why = e.value("detail", why);
        }
        write_line(err, "fsub: job " + std::to_string(s.id) + " refused: " + why);
        return 1;
      }
      if (j.contains("cluster") && j["cluster"].is_string()) {
        s.cluster = j["cluster"].get<std::string>();
        if (j.contains("gid") && j["gid"].is_string()) s.gid = j["gid"].get<std::string>();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (req.json) {
    nlohmann::json j = {{"job_id", s.id}, {"gid", nullptr}, {"cluster", nullptr}, {"state", s.state}};
    if (s.gid) j["gid"] = *s.gid;
    if (s.cluster) j["cluster"] = *s.cluster;
    write_line(out, j.dump());
    return 0;
  }
  write_line(out, req.parsable ? std::to_string(s.id) : "Submitted job " + std::to_string(s.id));
  std::fflush(out);
  if (s.cluster) {
    write_line(err, "fsub: job " + std::to_string(s.id) + " went to cluster " + *s.cluster +
                        (s.gid ? " (" + *s.gid + ")" : std::string()));
  }
  return 0;
}

int fjobs_through_faucets(faucets::client& c, const cmdline::fjobs_command_line& cmd, std::FILE* out) {
  if (cmd.fetch) {
    const std::string job = "job " + std::to_string(*cmd.fetch);
    const nlohmann::json o = c.outputs(*cmd.fetch);
    const std::string state = o.value("outputs", "");
    if (state == "waiting") {
      write_line(stderr, "fjobs: " + job + ": its outputs are not back yet (it is " + o.value("state", "?") + ")");
      return 1;
    }
    if (state != "back") {
      write_line(stderr, "fjobs: " + job + ": its outputs did not come back: " + o.value("detail", state));
      return 1;
    }
    std::vector<protocol::staged_file> files;
    try {
      files = protocol::parse_staged_files(o.contains("files") ? o["files"] : nlohmann::json::array(),
                                           protocol::k_max_stage_bytes);
      write_outputs(std::filesystem::current_path(), files);
    } catch (const std::exception& e) {
      write_line(stderr, "fjobs: " + job + ": " + e.what());
      return 1;
    }
    if (cmd.common.json) {
      nlohmann::json names = nlohmann::json::array();
      for (const auto& f : files) names.push_back(f.path);
      write_line(out, nlohmann::json{{"id", *cmd.fetch}, {"files", names}, {"bytes", protocol::staged_bytes(files)}}.dump());
    } else {
      for (const auto& f : files) write_line(out, f.path);
    }
    return 0;
  }
  if (cmd.history) {
    const nlohmann::json events = c.history(*cmd.history);
    if (cmd.common.json) {
      write_line(out, events.dump());
    } else {
      std::fputs(format_faucets_history_table(events).c_str(), out);
    }
    return 0;
  }
  std::optional<std::string> cluster;
  if (cmd.faucets.cluster && *cmd.faucets.cluster != "all") cluster = cmd.faucets.cluster;
  const nlohmann::json jobs = c.list_jobs(cmd.all, cluster);
  if (cmd.common.json) {
    write_line(out, jobs.dump());
  } else {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fputs(format_faucets_jobs_table(jobs, now).c_str(), out);
  }
  return 0;
}

int fkill_through_faucets(faucets::client& c, const cmdline::fkill_command_line& cmd, std::FILE* out, std::FILE* err) {
  int rc = 0;
  nlohmann::json answers = nlohmann::json::array();
  for (const auto id : cmd.job_ids) {
    try {
      answers.push_back(c.cancel(id).json);
    } catch (const faucets::error& e) {
      // No answer, a refused token, a server unavailable: the same for
      // every id, so said once.
      const int status = e.http_status();
      if (status == 0 || status == 401 || status >= 500) throw;
      write_line(err, "fkill: job " + std::to_string(id) + ": " + e.what());
      rc = 1;
    }
  }
  if (cmd.common.json) write_line(out, answers.dump());
  return rc;
}

}  // namespace aqs::client
