// aqs-sstat: Slurm's sstat over AQS: a running job's steps as the agents of
// its nodes measure them (client/sstat.hpp). aqsd says whether the job
// runs and where; each node's agent on this machine answers its owner.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "slurm/sstat.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

int main(int argc, char** argv) {
  const std::string name = slurm::command_name(argv[0], "sstat");
  return slurm::run_slurm(name, [&] {
    const std::vector<std::string> raw(argv + 1, argv + argc);
    const slurm::sstat_command_line cmd = slurm::parse_sstat_command_line(raw);
    if (cmd.help) {
      std::fputs(slurm::sstat_usage().c_str(), stdout);
      return 0;
    }
    if (cmd.help_format) {
      std::fputs(slurm::sstat_field_list().c_str(), stdout);
      return 0;
    }
    if (cmd.version) {
      std::printf("%s\n", slurm::k_version_line);
      return 0;
    }
    if (cmd.jobs.empty()) throw slurm::command_error("You didn't give me any jobs to stat.");
    std::vector<slurm::sstat_field> fields;
    try {
      fields = cmd.fields.empty() ? slurm::default_sstat_fields(cmd.pid_format) : slurm::parse_sstat_fields(cmd.fields);
    } catch (const std::invalid_argument& e) {
      throw slurm::command_error(e.what());
    }
    const std::string socket = client::socket_path(std::nullopt);
    client::connection c(socket);
    // The agents are named after aqsd's socket as they reach it, and run
    // as root or as aqsd's own user.
    std::error_code ec;
    const std::string aqsd = std::filesystem::weakly_canonical(std::filesystem::absolute(socket), ec).string();
    struct stat sb {};
    const std::int64_t trusted = ::stat(socket.c_str(), &sb) == 0 ? static_cast<std::int64_t>(sb.st_uid) : 0;

    if (cmd.header) std::fputs(slurm::render_sstat_header(fields, cmd.style).c_str(), stdout);
    std::fflush(stdout);
    int rc = 0;
    for (const auto& q : cmd.jobs) {
      const std::string step_text = "StepId=" + std::to_string(q.job_id) + "." + q.step.value_or("");
      protocol::list_jobs lj;
      lj.id = c.next_id();
      lj.all = true;
      lj.job_ids = {q.job_id};
      const auto jobs = c.ask(lj).jobs;
      if (jobs.empty()) {
        std::fprintf(stderr, "%s: error: couldn't get steps for job %lld\n", name.c_str(), static_cast<long long>(q.job_id));
        continue;
      }
      const auto& job = jobs.front();
      auto not_running = [&] {
        if (q.step) {
          std::fprintf(stderr, "%s: error: %s not found running.\n", name.c_str(), step_text.c_str());
        } else {
          std::fprintf(stderr, "%s: error: No steps running for job %lld\n", name.c_str(), static_cast<long long>(q.job_id));
        }
      };
      if (!core::holds_processors(job.state)) {
        not_running();
        continue;
      }
      std::vector<std::string> errors;
      bool refused = false;
      const auto steps = slurm::fetch_step_stats(aqsd, q.job_id, slurm::job_hosts(job.nodes), trusted, errors, refused);
      if (refused) {
        // slurmd's answer to anyone but the job's owner, root and SlurmUser.
        std::fprintf(stderr, "%s: error: problem getting step_layout for %s: Invalid user id\n", name.c_str(),
                     q.step ? step_text.c_str() : ("JobId=" + std::to_string(q.job_id)).c_str());
        continue;
      }
      if (steps.empty() && !errors.empty()) {
        std::string why;
        for (const auto& e : errors) why += (why.empty() ? "" : "; ") + e;
        std::fprintf(stderr,
                     "%s: error: cannot measure job %lld: %s (sstat asks the agents of the job's nodes on the machine "
                     "it runs on)\n",
                     name.c_str(), static_cast<long long>(q.job_id), why.c_str());
        rc = 1;
        continue;
      }
      const auto chosen = slurm::select_steps(steps, q.step, cmd.all_steps);
      if (chosen.empty()) {
        if (q.step) not_running();
        continue;
      }
      for (const auto& s : chosen) std::fputs(slurm::render_sstat_row(fields, s, cmd.style, cmd.no_convert).c_str(), stdout);
    }
    return rc;
  });
}
