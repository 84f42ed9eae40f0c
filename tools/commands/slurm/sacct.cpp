// aqs-sacct: the part of Slurm's sacct that workflow tools use, over aqsd's
// job store: -j, -X, -n, -p/-P, --format, -S/-E, --name, -u, -s, --json.
// AQS jobs have no steps: every line is a job (as with -X).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <unistd.h>

#include "client/job_listing.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

// `sacct -j ID` of an array's id lists every task of the array, as Slurm's
// does (submitit polls its map tasks so). aqsd lists jobs by exact id, and
// an array's tasks are stored in one request right after its id: they are
// read a block of ids at a time until a block holds none of them.
std::vector<std::int64_t> with_array_tasks(client::connection& c, const std::vector<std::int64_t>& ids) {
  if (ids.empty()) return ids;
  constexpr std::int64_t k_block = 1000;
  std::vector<std::int64_t> out = ids;
  protocol::list_jobs by_id;
  by_id.all = true;
  by_id.job_ids = ids;
  for (const auto& j : client::parse_jobs(client::list_job_pages(c, by_id, std::nullopt))) {
    if (j.array_job_id != j.id) continue;
    for (std::int64_t from = j.id + 1;; from += k_block) {
      protocol::list_jobs block;
      block.all = true;
      for (std::int64_t id = from; id < from + k_block; ++id) block.job_ids.push_back(id);
      bool any = false;
      for (const auto& t : client::parse_jobs(client::list_job_pages(c, block, std::nullopt))) {
        if (t.array_job_id != j.id) continue;
        any = true;
        if (std::find(out.begin(), out.end(), t.id) == out.end()) out.push_back(t.id);
      }
      if (!any) break;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::slurm_main(argc, argv, "sacct", slurm::parse_sacct_command_line, slurm::sacct_usage,
                           [&](const std::string& /*name*/, const auto& cmd) {
    std::vector<slurm::sacct_field> fields;
    try {
      if (cmd.format) {
        fields = slurm::parse_sacct_fields(*cmd.format);
      } else if (cmd.brief) {
        fields = slurm::parse_sacct_fields("jobid,state,exitcode");
      } else if (const char* env = std::getenv("SACCT_FORMAT"); env != nullptr && *env != '\0') {
        fields = slurm::parse_sacct_fields(env);
      } else {
        fields = slurm::default_sacct_fields();
      }
    } catch (const std::invalid_argument& e) {
      throw slurm::command_error(e.what());
    }
    const std::time_t now = slurm::now();
    // Without -j, sacct shows jobs since midnight (or -S) up to now (or -E).
    std::optional<std::time_t> start, end;
    if (cmd.start) {
      start = slurm::parse_sacct_time(*cmd.start, now);
      if (!start) throw slurm::command_error("Invalid time specification (pos=0): " + *cmd.start);
    } else if (cmd.job_ids.empty()) {
      start = slurm::parse_sacct_time("midnight", now);
    }
    if (cmd.end) {
      end = slurm::parse_sacct_time(*cmd.end, now);
      if (!end) throw slurm::command_error("Invalid time specification (pos=0): " + *cmd.end);
    }
    // Users: -u, else everyone with -a, -j or as root, else the caller.
    std::set<std::string> users;
    bool everyone = cmd.all_users || !cmd.job_ids.empty();
    for (const auto& u : cmd.users) {
      if (u == "-1" || u == "ALL" || u == "all") everyone = true;
      users.insert(slurm::resolve_user(u));
    }
    if (cmd.users.empty() && !everyone && ::getuid() != 0) users.insert(slurm::current_user());
    if (everyone && cmd.users.empty()) users.clear();

    protocol::list_jobs request;
    request.all = true;
    request.usage = true;  // Account, CPUTime, TotalCPU, MaxRSS, AllocTRES (issue 32)
    client::connection c(client::socket_path(std::nullopt));
    request.job_ids = with_array_tasks(c, cmd.job_ids);
    auto jobs = slurm::fetch_jobs(c, request, true);
    std::vector<slurm::job_view> shown;
    for (auto& j : jobs) {
      if (!users.empty() && users.count(j.info.user) == 0) continue;
      if (!cmd.names.empty() && std::find(cmd.names.begin(), cmd.names.end(), j.info.name) == cmd.names.end()) continue;
      if (cmd.states && std::find(cmd.states->begin(), cmd.states->end(), j.info.state) == cmd.states->end()) continue;
      // In the window: it had not ended before `start` and had been
      // submitted by `end`.
      if (start && j.end && *j.end < *start) continue;
      if (end && j.submit && *j.submit > *end) continue;
      shown.push_back(std::move(j));
    }
    if (cmd.json) {
      std::printf("%s\n", slurm::sacct_json(shown, now).c_str());
      return 0;
    }
    const auto style = cmd.parsable2 ? slurm::sacct_style::parsable2
                       : cmd.parsable ? slurm::sacct_style::parsable
                                      : slurm::sacct_style::table;
    const std::string text = slurm::render_sacct(fields, shown, !cmd.noheader, style, now, cmd.delimiter.value_or("|"),
                                                 std::getenv("SLURM_TIME_FORMAT"));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}
