// srun_step: srun's tasks, as Slurm runs them: a step of N tasks over the
// job's allocation (mpirun), each task told who it is (SLURM_PROCID, ...),
// its lines labelled (-l) and its program picked from a --multi-prog file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::slurm {

// srun's options that shape its tasks rather than its allocation, taken off
// the options part of its command line (the words before the command): -l,
// --label, --multi-prog and --overlap; the rest go to frun for the allocation.
struct srun_task_options {
  bool label = false;
  bool multi_prog = false;         // the command is a configuration file
  bool overlap = false;            // --overlap: the step shares the processors other steps hold
  std::vector<std::string> rest;   // the options without those
};
srun_task_options split_task_options(std::span<const std::string> options);

// One line of a --multi-prog file: the tasks it is for and its command.
struct multi_prog_line {
  bool any = false;                                       // "*"
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // inclusive, in the order written
  std::vector<std::string> words;                         // program and arguments, %t/%o not yet replaced
};
// Parses Slurm's --multi-prog format: per line "TASKS PROGRAM ARGS...", TASKS
// a list of ranks and ranges ("0", "1-3,5") or "*"; '#' starts a comment;
// words may be quoted ('...' or "..."). Throws usage_error naming the line
// for a bad task list, a line without a program, or an unterminated quote.
std::vector<multi_prog_line> parse_multi_prog(std::string_view text);
// The command of task `rank` (%t: the rank, %o: its offset among the
// line's tasks), or nullopt when no line names it.
std::optional<std::vector<std::string>> multi_prog_command(const std::vector<multi_prog_line>& lines, std::int64_t rank);
// Throws usage_error naming the first of tasks 0..ntasks-1 that no line
// names (Slurm refuses such a file before starting anything).
void check_multi_prog(const std::vector<multi_prog_line>& lines, std::int64_t ntasks);

// The node number (SLURM_NODEID: the node's place in the job's sorted node
// list) of each of the first `ntasks` tasks of the job, from what the agent
// put in the job's environment: AQS_NODELIST ("node2:0-3,node3:0-1", map
// order), SLURM_TASKS_PER_NODE ("2(x3),1", the same order) and
// SLURM_JOB_NODELIST. Tasks beyond the job's layout get the last node.
std::vector<std::int64_t> task_node_ids(std::string_view aqs_nodelist, std::string_view tasks_per_node,
                                        std::string_view job_nodelist, std::int64_t ntasks);
// The job's processors, from the job's rankfile (the agent's: "rank I=HOST
// slot=A,B" per task) and its layout (AQS_NODELIST, SLURM_TASKS_PER_NODE,
// SLURM_JOB_NODELIST): per node in map order its host, SLURM_NODEID, its
// processors (as many as AQS_NODELIST gives it, each on its cpu: an agent
// with --procs beyond its cores puts several on one) and its tasks' slots.
// A slot is one processor of a node, numbered node by node: what
// concurrent steps claim. Throws usage_error for a rankfile that is not
// the agent's or disagrees with SLURM_TASKS_PER_NODE.
struct job_slots {
  struct node {
    std::string host;
    std::int64_t id = 0;
    std::size_t first_slot = 0;
    std::vector<std::string> cpus;                // slot first_slot + k is cpus[k]
    std::vector<std::vector<std::size_t>> tasks;  // the job's tasks here: their slots
    std::vector<std::string> task_text;           // ... and their rankfile slot lists, as the job's
  };
  std::vector<node> nodes;
  std::size_t count = 0;
};
job_slots read_job_slots(std::string_view job_rankfile, std::string_view aqs_nodelist,
                         std::string_view tasks_per_node, std::string_view job_nodelist);

// A step inside the job, placed over the job's slots that are not `busy`
// (indexed by slot; other running steps'), as Slurm's srun places a step in
// its allocation. Without -c, --ntasks-per-node or -N: the job's own tasks
// in order whose processors are free (all free: its first N tasks). With
// them: block distribution over the nodes in map order, each task on
// `cpus_per_task` free processors of its node, at most `ntasks_per_node`
// tasks a node, on the first `nodes` nodes with room (each at least one
// task). `rankfile` is mpirun's for the step ("rank I=HOST slot=A,B"
// per task), node_ids as task_node_ids', `slots` those it takes. Throws
// usage_error ("More processors requested than permitted: ...", as
// Slurm's) when the tasks do not fit.
struct step_shape {
  std::int64_t ntasks = 1;
  std::optional<std::int64_t> cpus_per_task;
  std::optional<std::int64_t> ntasks_per_node;
  std::optional<std::int64_t> nodes;  // -N: on this many nodes, each at least one task
};
struct step_placement {
  std::string rankfile;
  std::vector<std::int64_t> node_ids;
  std::vector<std::size_t> slots;
};
step_placement place_step(const job_slots& job, const step_shape& shape, const std::vector<bool>& busy = {});

// The slots of job `job_id` (of cluster `cluster`, as next_step_id) that
// this user's running steps hold: OFD byte-range locks, byte N for slot N,
// on the user's own file /tmp/aqs-steps-UID-CLUSTER-JOB.slots (0600,
// O_NOFOLLOW; another user's file means no claims). claim() waits, polling,
// until `place` finds room among the free slots (place throws
// "More processors requested" while they are busy; `waiting` is called
// once, the first time), then locks the slots it took; the claim holds
// while this object lives (and dies with the process).
class step_claim {
 public:
  step_claim(std::int64_t job_id, std::string_view cluster);
  ~step_claim();
  step_claim(const step_claim&) = delete;
  step_claim& operator=(const step_claim&) = delete;
  step_placement claim(std::size_t slots, const std::function<step_placement(const std::vector<bool>& busy)>& place,
                       const std::function<void()>& waiting);

 private:
  int fd_ = -1;
};

// "0*2,1*2" for {0,0,1,1}, and back.
std::string join_runs(const std::vector<std::int64_t>& v);
std::vector<std::int64_t> split_runs(std::string_view text);

// What one task of a step needs to know, passed from srun to the task
// wrapper (aqs-srun --aqs-task KEY=VALUE... -- COMMAND...).
struct task_plan {
  std::int64_t ntasks = 1;
  std::int64_t step_id = 0;
  std::vector<std::int64_t> node_ids;  // per task
  bool label = false;
  std::optional<std::string> multi_prog;  // the file
  std::optional<std::int64_t> cpus_per_task;  // the step's -c: SLURM_CPUS_PER_TASK
  std::vector<std::string> command;
};
std::vector<std::string> task_plan_words(const task_plan& p);
// Throws usage_error for words that are not a task plan.
task_plan parse_task_plan(std::span<const std::string> words);

// The variables a task gets: SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
// SLURM_NTASKS/SLURM_NPROCS, SLURM_STEP_ID/SLURM_STEPID,
// SLURM_STEP_NUM_TASKS and SLURM_STEP_NUM_NODES (and SLURM_CPUS_PER_TASK
// for a step with its own -c). The node and local number
// come from the plan's node ids; `local_rank` (mpirun's) only without them.
std::vector<std::pair<std::string, std::string>> task_variables(const task_plan& p, std::int64_t rank,
                                                                std::int64_t local_rank);

// Runs one task in this process (the wrapper mpirun starts once per task):
// reads its rank from OpenMPI's variables (0 without them), sets the task's
// variables, picks its command (--multi-prog) and execs it, or with -l runs
// it as a child and writes its lines as "RANK: line" (the rank right-aligned
// to the width of the largest), returning its exit status (128 + signal).
int run_task(const task_plan& p);

// The next step number of job `job_id` of cluster `cluster` (its id, the
// part of AQS_JOB_TOKEN before the '.'; another cluster or a new database
// numbers its jobs from 1 again) for this user: 0, 1, ... from a counter in
// /tmp/aqs-steps-UID-CLUSTER-JOB, used only if it is this user's own file.
// A job's first step also removes this user's counters untouched for 30 days.
std::int64_t next_step_id(std::int64_t job_id, std::string_view cluster);

}  // namespace aqs::slurm
