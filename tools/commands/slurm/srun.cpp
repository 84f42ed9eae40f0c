// aqs-srun: Slurm's srun over AQS. Outside a job it asks frun for an
// interactive job (waits for processors, streams the output, exits with the
// job's code) whose command is srun again; inside a job (AQS_JOB_ID) srun
// starts a step of N tasks over the job's allocation with mpirun, each task
// in srun's task wrapper (aqs-srun --aqs-task ...), which sets
// SLURM_PROCID and the rest, labels lines (-l) and picks the task's program
// (--multi-prog). Slurm options that change nothing AQS does (--cpu-bind,
// --mpi=TYPE, --pty, ...) are dropped with a warning.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmdline/exec_path.hpp"
#include "cmdline/job_options.hpp"
#include "cmdline/job_step.hpp"
#include "slurm/salloc_session.hpp"
#include "slurm/slurm_client.hpp"
#include "slurm/srun_step.hpp"

extern char** environ;

using namespace aqs;

namespace {

bool frun_knows(const std::string& spelled, const std::optional<std::string>& value) {
  return slurm::parser_accepts(cmdline::parse_frun_command_line, spelled, value, "true");
}

// This program's real file (a symlink "srun" in another directory still
// finds the rest beside it).
std::filesystem::path self_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw slurm::command_error("cannot find my own program (/proc/self/exe): " + ec.message());
  return self;
}

// frun beside this program, else frun on the PATH.
std::string find_frun() {
  const auto self = self_path();
  for (const auto& dir : {self.parent_path(), self.parent_path().parent_path()}) {
    const auto candidate = dir / "frun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "frun";
}

[[noreturn]] void exec_words(const std::string& file, std::vector<std::string> words) {
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  if (file.find('/') != std::string::npos) {
    ::execv(file.c_str(), argv.data());
  } else {
    ::execvp(file.c_str(), argv.data());
  }
  throw slurm::command_error("cannot run " + file + ": " + std::strerror(errno));
}

std::string getenv_or(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// The job's processors from its rankfile (the agent's, in
// $OMPI_MCA_rmaps_rank_file_path); nullopt for a job that has none (an
// adaptive job's shim places its ranks itself), with a warning when the
// step asked for its own layout.
std::optional<slurm::job_slots> job_slots(bool own_layout) {
  const std::string path = getenv_or("OMPI_MCA_rmaps_rank_file_path");
  std::FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    if (own_layout) {
      std::fprintf(stderr, "srun: warning: -c/--ntasks-per-node/-N: the job has no rankfile (%s); the step keeps the job's layout\n",
                   path.empty() ? "an adaptive job's ranks are placed by its shim" : std::strerror(errno));
    }
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (8 << 20);) text.append(buf, n);
  std::fclose(f);
  return slurm::read_job_slots(text, getenv_or("AQS_NODELIST"), getenv_or("SLURM_TASKS_PER_NODE"),
                               getenv_or("SLURM_JOB_NODELIST"));
}

// mpirun `argv` with the step's own rankfile, in a private directory
// removed when mpirun ends; returns mpirun's exit status (128 + N for
// signal N). (Not also OpenMPI's session base, orte_local_tmpdir_base: the
// ranks inherit it beside the orte_tmpdir_base their daemon gives them,
// and MPI_Init refuses the pair.)
int run_with_rankfile(const std::string& mpirun, std::vector<std::string> argv, const std::string& rankfile) {
  std::string dir = getenv_or("TMPDIR", "/tmp");
  if (dir.empty()) dir = "/tmp";
  std::string step_dir = dir + "/aqs-step-XXXXXX";
  if (::mkdtemp(step_dir.data()) == nullptr) {
    throw slurm::command_error("cannot make the step's directory in " + dir + ": " + std::strerror(errno));
  }
  const std::string name = step_dir + "/rankfile";
  struct step_dir_guard {
    std::string path;
    ~step_dir_guard() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } guard{step_dir};
  const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw slurm::command_error("cannot write the step's rankfile " + name + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < rankfile.size()) {
    const ssize_t w = ::write(fd, rankfile.data() + done, rankfile.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw slurm::command_error("cannot write the step's rankfile " + name + ": " + why);
    }
    done += static_cast<std::size_t>(w);
  }
  ::close(fd);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) throw slurm::command_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (child == 0) {
    ::setenv("OMPI_MCA_rmaps_rank_file_path", name.c_str(), 1);
    std::vector<char*> words;
    for (auto& w : argv) words.push_back(w.data());
    words.push_back(nullptr);
    ::execv(mpirun.c_str(), words.data());
    std::fprintf(stderr, "srun: error: cannot run %s: %s\n", mpirun.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  // Ctrl-C and the job's end reach mpirun too (one process group); srun
  // stays to remove the file and report mpirun's status.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, nullptr);
  ::sigaction(SIGTERM, &ignore, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// A step of the surrounding job: N tasks (-n, else the job's) over its
// allocation through mpirun, each in the task wrapper.
int run_step(const slurm::srun_task_options& t, const cmdline::frun_command_line& cmd) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  const std::string cwd = std::filesystem::current_path().string();
  if (cmd.options.adaptive.value_or(false)) {
    throw slurm::command_error("--adaptive inside a job: a step runs in the job's allocation, which its scheduler sizes");
  }
  const std::int64_t job_tasks = std::atoll(getenv_or("SLURM_NTASKS", "1").c_str());
  std::int64_t ntasks = cmd.options.procs.value_or(job_tasks > 0 ? job_tasks : 1);
  // -c, --ntasks-per-node or -N: the step's own layout over the job's
  // processors (place_step checks that it fits); else the job's first N tasks.
  const bool own_layout = cmd.options.cpus_per_task.has_value() || cmd.options.ntasks_per_node.has_value() ||
                          cmd.options.nodes_min.has_value();
  if (!own_layout && job_tasks > 0 && ntasks > job_tasks) {
    throw slurm::command_error("-n " + std::to_string(ntasks) + " is more than the job's " + std::to_string(job_tasks) +
                             " tasks (a step runs inside the job's allocation)");
  }
  slurm::task_plan plan;
  plan.ntasks = ntasks;
  plan.label = t.label;
  plan.command = cmd.command;
  if (t.multi_prog) {
    if (cmd.command.size() != 1) throw slurm::command_error("--multi-prog takes one configuration file and no arguments");
    std::filesystem::path file = cmd.command.front();
    if (file.is_relative()) file = std::filesystem::path(cwd) / file;
    std::FILE* f = std::fopen(file.c_str(), "r");
    if (f == nullptr) throw slurm::command_error("cannot read --multi-prog file " + file.string() + ": " + std::strerror(errno));
    std::string text;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1 << 20);) text.append(buf, n);
    std::fclose(f);
    slurm::check_multi_prog(slurm::parse_multi_prog(text), ntasks);
    plan.multi_prog = file.string();
  }
  const std::string token = getenv_or("AQS_JOB_TOKEN");
  plan.step_id = slurm::next_step_id(std::atoll(getenv_or("AQS_JOB_ID", "0").c_str()), token.substr(0, token.find('.')));
  const auto mpirun = cmdline::find_executable("mpirun", cmdline::path_variable(env), cwd);
  const std::string job_id = getenv_or("AQS_JOB_ID", "0");
  std::optional<slurm::job_slots> slots;
  if (mpirun) slots = job_slots(own_layout);
  // The step's processors: the job's that other running steps of the job do
  // not hold (Slurm's steps do not share processors); it waits for them,
  // as Slurm's srun does, when they are busy.
  std::optional<slurm::step_placement> placed;
  std::optional<slurm::step_claim> claim;
  if (slots) {
    const slurm::step_shape shape{ntasks, cmd.options.cpus_per_task, cmd.options.ntasks_per_node,
                                  cmd.options.nodes_min};
    claim.emplace(std::atoll(job_id.c_str()), token.substr(0, token.find('.')));
    bool waited = false;
    // --overlap (a step inside a step, a monitor beside the work): the
    // processors as if no other step held them, and none claimed.
    if (t.overlap) placed = slurm::place_step(*slots, shape);
    else placed = claim->claim(
        slots->count, [&](const std::vector<bool>& busy) { return slurm::place_step(*slots, shape, busy); },
        [&] {
          waited = true;
          std::fprintf(stderr, "srun: Job %s step creation temporarily disabled, retrying (Requested nodes are busy)\n",
                       job_id.c_str());
        });
    if (waited) std::fprintf(stderr, "srun: Step created for StepId=%s.%lld\n", job_id.c_str(), static_cast<long long>(plan.step_id));
    plan.node_ids = placed->node_ids;
    if (own_layout) plan.cpus_per_task = cmd.options.cpus_per_task;
  } else {
    plan.node_ids = slurm::task_node_ids(getenv_or("AQS_NODELIST"), getenv_or("SLURM_TASKS_PER_NODE"),
                                         getenv_or("SLURM_JOB_NODELIST"), ntasks);
  }
  const std::string self = self_path().string();
  std::vector<std::string> wrapper{self, "--aqs-task"};
  for (auto& w : slurm::task_plan_words(plan)) wrapper.push_back(std::move(w));
  if (!mpirun) {
    if (ntasks != 1) {
      throw slurm::command_error("a step of " + std::to_string(ntasks) +
                               " tasks starts with mpirun, and there is no mpirun on PATH");
    }
    return slurm::run_task(plan);  // one task, here
  }
  std::vector<std::string> argv{*mpirun, "-np", std::to_string(ntasks)};
  argv.insert(argv.end(), wrapper.begin(), wrapper.end());
  if (!placed) exec_words(*mpirun, argv);
  return run_with_rankfile(*mpirun, argv, placed->rankfile);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> raw(argv + 1, argv + argc);
  if (!raw.empty() && raw.front() == "--aqs-task") {
    // One task of a step (mpirun started it): not for users.
    return slurm::run_slurm("srun", [&] {
      return slurm::run_task(slurm::parse_task_plan(std::span<const std::string>(raw).subspan(1)));
    });
  }
  const std::string name = slurm::command_name(argv[0], "srun");
  // In salloc's shell (not inside a job): a step in salloc's allocation,
  // run there by its holder with this srun's command line.
  if (const char* alloc = std::getenv(slurm::k_salloc_socket_variable);
      alloc != nullptr && *alloc != '\0' && std::getenv("AQS_CPUS") == nullptr) {
    bool help = false;
    for (const auto& a : raw) help = help || a == "--help" || a == "-h" || a == "--usage" || a == "-V" || a == "--version";
    if (!help) return slurm::run_slurm(name, [&] { return slurm::run_step_in_allocation(alloc, raw); });
  }
  return slurm::run_slurm(name, [&] {
    for (const auto& a : raw) {
      if (a == "--help" || a == "-h" || a == "--usage") {
        std::fputs(slurm::srun_usage().c_str(), stdout);
        return 0;
      }
      if (a == "-V" || a == "--version") {
        std::printf("%s\n", slurm::k_version_line);
        return 0;
      }
      if (a == "--" || !a.starts_with("-")) break;
    }
    // srun's --mpi takes a plugin name; frun's --mpi is a flag: always Slurm's.
    const slurm::translated_args t = slurm::translate_submit_args(raw, true, [](const std::string& o, const auto& v) {
      if (o == "--mpi") return false;
      return frun_knows(o, v);
    });
    for (const auto& w : t.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
    // The options (before the command) without -l and --multi-prog, which
    // shape the tasks, not the allocation.
    const std::span<const std::string> all(t.args);
    const slurm::srun_task_options tasks = slurm::split_task_options(all.first(t.command_at));
    std::vector<std::string> line = tasks.rest;
    line.insert(line.end(), t.args.begin() + static_cast<std::ptrdiff_t>(t.command_at), t.args.end());
    // Checked here so that errors say "srun:".
    const auto cmd = cmdline::parse_frun_command_line(line);

    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    if (cmdline::inside_a_job(env)) {
      for (const auto& w : cmd.warnings) std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str());
      return run_step(tasks, cmd);
    }
    std::vector<std::string> words{"srun"};  // frun names itself srun
    if (cmd.options.adaptive.value_or(false)) {
      // An adaptive program starts its ranks itself: the command as given.
      if (tasks.label || tasks.multi_prog) throw slurm::command_error("-l and --multi-prog are for rigid jobs' tasks");
      words.insert(words.end(), line.begin(), line.end());
      exec_words(find_frun(), words);
    }
    // The job runs srun again, once, on its first node: there it starts the
    // step of the job's tasks, as Slurm's srun does in the allocation it got.
    words.insert(words.end(), tasks.rest.begin(), tasks.rest.end());
    words.insert(words.end(), {"--no-mpi", "--", self_path().string()});
    if (tasks.label) words.emplace_back("--label");
    if (tasks.multi_prog) words.emplace_back("--multi-prog");
    words.emplace_back("--");
    words.insert(words.end(), cmd.command.begin(), cmd.command.end());
    exec_words(find_frun(), words);
  });
}
