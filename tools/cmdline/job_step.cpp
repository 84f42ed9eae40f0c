// job_step: a step of the surrounding job, started with mpirun over its allocation.
#include "cmdline/job_step.hpp"

#include "cmdline/exec_path.hpp"
#include "cmdline/usage_error.hpp"

namespace aqs::cmdline {

namespace {

std::optional<std::string> value_of(const std::vector<std::string>& env, const std::string& key) {
  std::optional<std::string> out;
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      out = kv.substr(key.size() + 1);
    }
  }
  return out;
}

}  // namespace

bool inside_a_job(const std::vector<std::string>& environment) {
  return value_of(environment, "AQS_JOB_ID").has_value() && value_of(environment, "AQS_CPUS").has_value();
}

std::vector<std::string> step_argv(const frun_command_line& cmd, const std::vector<std::string>& environment,
                                   const std::string& cwd) {
  if (cmd.options.adaptive.value_or(false)) {
    throw usage_error("--adaptive inside a job: a step runs in the job's allocation, which its scheduler sizes");
  }
  const auto tasks_text = value_of(environment, "SLURM_NTASKS");
  const long tasks = tasks_text ? std::stol(*tasks_text) : 0;
  if (cmd.options.procs && tasks > 0 && *cmd.options.procs > tasks) {
    throw usage_error("-n " + std::to_string(*cmd.options.procs) + " is more than the job's " +
                      std::to_string(tasks) + " tasks (a step runs inside the job's allocation)");
  }
  const auto mpirun = find_executable("mpirun", path_variable(environment), cwd);
  if (!mpirun) throw usage_error("a step inside a job starts with mpirun, and there is no mpirun on PATH");
  std::vector<std::string> argv{*mpirun};
  if (cmd.options.procs) {
    argv.push_back("-np");
    argv.push_back(std::to_string(*cmd.options.procs));
  }
  argv.insert(argv.end(), cmd.command.begin(), cmd.command.end());
  return argv;
}

}  // namespace aqs::cmdline
