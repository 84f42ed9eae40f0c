// salloc_session: salloc's interactive allocation, as Slurm's salloc gives
// it: the user's shell runs here, on the machine salloc was typed on, with
// the allocation's SLURM_* variables, and `srun` in it starts steps in the
// allocation. Three parts meet:
// - salloc (run_interactive_salloc): asks aqsd for an interactive job whose
//   one process is the holder, learns from the holder's first output lines
//   (through aqsd, to the job's watcher only) its variables and socket,
//   runs the shell, and at its end tells the holder to end the job;
// - the holder (run_allocation_holder): the job's process on its first
//   node; it serves srun's step requests on a Unix socket in a 0700
//   directory of the job's user, answering only that user (SO_PEERCRED);
// - srun in the shell (run_step_in_allocation): hands its command line,
//   environment, directory and its stdin/stdout/stderr (SCM_RIGHTS) to the
//   holder, which runs aqs-srun inside the job with them, and forwards
//   signals; its exit status is the step's.
// The holder's socket is reached through the file system: salloc's shell
// must run on the machine of the allocation's first node (see the user
// guide); elsewhere srun says so.
#pragma once

#include <string>
#include <vector>

#include "cmdline/job_options.hpp"

namespace aqs::slurm {

// The environment variable that tells srun it runs in salloc's shell: the
// holder's socket.
inline constexpr const char* k_salloc_socket_variable = "AQS_SALLOC_SOCKET";
// aqs-salloc's hidden first argument that makes it the holder.
inline constexpr const char* k_holder_argument = "--aqs-hold";

// salloc's command line as salloc reads it: Slurm's options translated
// for frun (translate_submit_args over frun's parser), the warnings for
// those AQS drops, the allocation's options and the command (a leading
// "--" taken off; empty: the interactive shell). With a command, the
// frun line it becomes is checked here, so that errors say "salloc:".
// Throws cmdline::usage_error (or command_error) for a refused option,
// naming it once.
struct salloc_command_line {
  std::vector<std::string> warnings;
  std::vector<std::string> options;
  std::vector<std::string> command;
  std::vector<std::string> frun_line() const;  // options --no-mpi -- command
};
salloc_command_line parse_salloc_args(const std::vector<std::string>& raw);

// salloc without a command. `options` are frun's options (translated from
// salloc's); `self` is aqs-salloc's own path (the holder's program).
// Returns salloc's exit status: the shell's, as Slurm's salloc.
int run_interactive_salloc(const std::vector<std::string>& options, const std::string& self);

// The holder: runs until released (exits with the code salloc gives) or
// killed with the job.
int run_allocation_holder(const std::string& srun_path);

// srun inside salloc's shell: `args` are srun's arguments as typed.
int run_step_in_allocation(const std::string& socket, const std::vector<std::string>& args);

// The holder's announcement lines ("AQS-SALLOC KEY VALUE"), parsed: what
// salloc reads off the job's output. Returns false while READY has not
// been seen; unrelated lines are ignored.
struct holder_announcement {
  std::string socket;
  std::vector<std::string> environment;  // "SLURM_JOB_ID=5", ...
  bool ready = false;
};
void read_announcement(const std::string& line, holder_announcement& a);

}  // namespace aqs::slurm
