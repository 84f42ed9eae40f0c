// Unit tests of fsub/frun option parsing, #AQS/#SBATCH directives and the submit request they build.
#include <doctest/doctest.h>

#include "core/begin_time.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cmdline/job_options.hpp"
#include "cmdline/usage_error.hpp"
#include "temp_dir.hpp"

using namespace aqs::cmdline;
using args = std::vector<std::string>;

namespace {

submit_context ctx() {
  submit_context c;
  c.cwd = "/home/alice";
  c.environment = {"PATH=/usr/bin", "HOME=/home/alice", "broken", "=odd"};
  return c;
}

fsub_request fsub(const args& a, const std::string& script = "#!/bin/sh\necho hi\n") {
  const auto cmd = parse_fsub_command_line(a);
  return build_fsub_request(cmd, script, ctx());
}

std::string fsub_error(const args& a, const std::string& script = "#!/bin/sh\necho hi\n") {
  try {
    fsub(a, script);
  } catch (const usage_error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return what;
  }
  FAIL("no usage_error");
  return "";
}

}  // namespace

TEST_CASE("all Slurm option forms are accepted: --opt=value, --opt value, -nVALUE, -n VALUE") {
  for (const args& a : {args{"--ntasks=4", "job.sh"}, args{"--ntasks", "4", "job.sh"}, args{"-n4", "job.sh"},
                        args{"-n", "4", "job.sh"}, args{"--procs=4", "job.sh"}}) {
    CAPTURE(a[0]);
    const auto r = fsub(a);
    CHECK(r.request.job.min_pe == 4);
    CHECK(r.request.job.max_pe == 4);
    CHECK_FALSE(r.request.job.adaptive);
  }
}

TEST_CASE("a plain fsub builds a complete submit request with the documented defaults") {
  const auto r = fsub({"run/job.sh", "a", "b c"});
  const auto& j = r.request.job;
  CHECK(j.name == "job.sh");
  CHECK(j.script == "#!/bin/sh\necho hi\n");
  CHECK(j.argv == args{"a", "b c"});
  CHECK(j.workdir == "/home/alice");
  CHECK(j.environment == args{"PATH=/usr/bin", "HOME=/home/alice", "PWD=/home/alice"});
  CHECK(j.stdout_pattern == "aqs-%j.out");
  CHECK_FALSE(j.stderr_pattern.has_value());
  CHECK(j.min_pe == 1);
  CHECK(j.max_pe == 1);
  CHECK_FALSE(j.walltime_s.has_value());
  CHECK(j.afterok.empty());
  CHECK_FALSE(j.requeue);
  CHECK_FALSE(j.interactive);
  CHECK_FALSE(r.parsable);
  CHECK_FALSE(r.json);
  CHECK(r.warnings.empty());
}

TEST_CASE("every fsub option reaches the request") {
  const auto r = fsub({"--min=2", "--max", "8", "--adaptive", "-t", "1-00:30", "-J", "heat", "-o", "out-%j",
                       "-e=err-%j", "-D", "runs/../data", "--dependency=afterok:5:6,afterok:7", "--requeue",
                       "--parsable", "--json", "job.sh"});
  const auto& j = r.request.job;
  CHECK(j.min_pe == 2);
  CHECK(j.max_pe == 8);
  CHECK(j.adaptive);
  CHECK(j.walltime_s == 24 * 3600 + 30 * 60);
  CHECK(j.name == "heat");
  CHECK(j.stdout_pattern == "out-%j");
  CHECK(j.stderr_pattern == "=err-%j");  // short options take everything after the letter, as getopt does
  CHECK(j.workdir == "/home/alice/data");
  CHECK(j.afterok == std::vector<std::int64_t>{5, 6, 7});
  CHECK(j.requeue);
  CHECK(r.parsable);
  CHECK(r.json);
}

TEST_CASE("--wrap makes a /bin/sh script named wrap") {
  const auto cmd = parse_fsub_command_line(args{"--wrap", "echo hello; sleep 1"});
  const auto r = build_fsub_request(cmd, std::nullopt, ctx());
  CHECK(r.request.job.script == "#!/bin/sh\necho hello; sleep 1\n");
  CHECK(r.request.job.name == "wrap");
  CHECK(r.request.job.argv.empty());
}

TEST_CASE("size rules: --min alone, --max alone, adaptive defaults, and their errors") {
  CHECK(fsub({"--min", "3", "j.sh"}).request.job.max_pe == 3);
  CHECK(fsub({"--max", "6", "j.sh"}).request.job.min_pe == 6);
  const auto a = fsub({"--max", "6", "--adaptive", "j.sh"}).request.job;
  CHECK(a.min_pe == 1);
  CHECK(a.max_pe == 6);
  CHECK(fsub({"-n", "4", "--adaptive", "j.sh"}).request.job.adaptive);
  CHECK(fsub_error({"--min", "2", "--max", "8", "j.sh"}).find("needs --adaptive") != std::string::npos);
  CHECK(fsub_error({"--min", "9", "--max", "8", "--adaptive", "j.sh"}).find("greater than --max") != std::string::npos);
  CHECK(fsub_error({"-n", "4", "--min", "2", "j.sh"}).find("not both") != std::string::npos);
  CHECK(fsub_error({"-n", "0", "j.sh"}).find("invalid value '0' for -n") != std::string::npos);
  CHECK(fsub_error({"-n", "x", "j.sh"}).find("-n") != std::string::npos);
  CHECK(fsub_error({"--ntasks=2000000", "j.sh"}).find("--ntasks") != std::string::npos);
}

TEST_CASE("command-line mistakes are one-line errors") {
  CHECK(fsub_error({"--memory=4G", "j.sh"}).find("unknown option '--memory'") != std::string::npos);
  CHECK(fsub_error({"-y", "j.sh"}).find("unknown option '-y'") != std::string::npos);
  CHECK(fsub_error({"-t"}).find("needs a value") != std::string::npos);
  CHECK(fsub_error({"--adaptive=yes", "j.sh"}).find("takes no value") != std::string::npos);
  CHECK(fsub_error({"-t", "1:2:3:4", "j.sh"}).find("invalid time limit '1:2:3:4'") != std::string::npos);
  CHECK(fsub_error({"--dependency=aftercorr:1", "j.sh"}).find("'aftercorr' is not supported") != std::string::npos);
  const auto any = fsub({"--dependency=afterany:3?afternotok:4", "j.sh"}).request.job;
  CHECK(any.afterok == std::vector<std::int64_t>{3, 4});
  CHECK(any.geometry->dependency == "afterany:3?afternotok:4");
  CHECK_FALSE(fsub({"--dependency=afterok:3", "j.sh"}).request.job.geometry);
  CHECK(fsub_error({"--dependency=afterok", "j.sh"}).find("names no job") != std::string::npos);
  CHECK(fsub_error({"--dependency=afterok:x", "j.sh"}).find("invalid job id 'x'") != std::string::npos);
  CHECK(fsub_error({"-J", "", "j.sh"}).find("empty value") != std::string::npos);
  CHECK(fsub_error({}).find("no script") != std::string::npos);
  CHECK(fsub_error({"--wrap", "true", "j.sh"}).find("not both") != std::string::npos);
  CHECK(fsub_error({"j.sh"}, "echo no shebang\n").find("first line must start with #!") != std::string::npos);
  CHECK(fsub_error({"j.sh"}, std::string("#!/bin/sh\necho \0\n", 17)).find("NUL") != std::string::npos);
  CHECK(fsub_error({"j.sh"}, "#!/bin/sh\necho caf\xe9\n").find("not valid UTF-8") != std::string::npos);
}

TEST_CASE("--help needs nothing else, and the usage text lists every option") {
  const auto cmd = parse_fsub_command_line(args{"--help"});
  CHECK(cmd.options.help);
  CHECK_FALSE(cmd.script_path.has_value());
  CHECK_THROWS_AS(parse_fsub_command_line(args{"-h", "--bogus"}), usage_error);
  for (const char* opt : {"--ntasks", "--procs", "--min", "--max", "--adaptive", "--time", "--job-name", "--output",
                          "--error", "--chdir", "--dependency", "--requeue", "--wrap", "--parsable", "--json", "--help"}) {
    CAPTURE(opt);
    CHECK(fsub_usage().find(opt) != std::string::npos);
  }
  CHECK(frun_usage().find("--ntasks") != std::string::npos);
}

TEST_CASE("#AQS and #SBATCH directives at the top of the script set options") {
  const std::string script =
      "#!/bin/bash\n"
      "# a comment\n"
      "\n"
      "#SBATCH --job-name=slurmname\n"
      "#SBATCH -n 4 --time=10   # trailing comment\n"
      "#AQS -o 'my out %j.txt'\n"
      "#SBATCH --requeue\n"
      "srun ./app\n"
      "#SBATCH -n 99\n";  // after the first command: not a directive
  const auto d = parse_directives(script);
  CHECK(d.options.job_name == "slurmname");
  CHECK(d.options.procs == 4);
  CHECK(d.options.time_limit_s == 600);
  CHECK(d.options.output == "my out %j.txt");
  CHECK(d.options.requeue == true);
  CHECK(d.warnings.empty());

  const auto r = fsub({"job.sh"}, script);
  CHECK(r.request.job.name == "slurmname");
  CHECK(r.request.job.min_pe == 4);
  CHECK(r.request.job.walltime_s == 600);
  CHECK(r.request.job.stdout_pattern == "my out %j.txt");
}

TEST_CASE("command-line options override directives, the size as a whole") {
  const std::string script = "#!/bin/sh\n#AQS -n 4 -J fromscript -t 5\n#SBATCH --dependency=afterok:1\ntrue\n";
  const auto r = fsub({"--min", "2", "--max", "8", "--adaptive", "-J", "fromcli", "job.sh"}, script);
  const auto& j = r.request.job;
  CHECK(j.min_pe == 2);
  CHECK(j.max_pe == 8);
  CHECK(j.name == "fromcli");
  CHECK(j.walltime_s == 300);  // not overridden: kept from the script
  CHECK(j.afterok == std::vector<std::int64_t>{1});
}

TEST_CASE("later directive lines override earlier ones") {
  const auto d = parse_directives("#!/bin/sh\n#SBATCH -n 2\n#AQS --min 1 --max 3 --adaptive\n#SBATCH -t 1\n#SBATCH -t 2\n");
  CHECK_FALSE(d.options.procs.has_value());
  CHECK(d.options.min_pe == 1);
  CHECK(d.options.max_pe == 3);
  CHECK(d.options.time_limit_s == 120);
}

TEST_CASE("Slurm geometry options mean the same in #SBATCH, #AQS and on the command line") {
  const std::string sbatch = "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=4 -c 3 --mem=4G --gres=gpu:v100:2 -p debug\n";
  const std::string aqs = "#!/bin/sh\n#AQS -N 2 --ntasks-per-node=4 -c 3 --mem=4G --gres=gpu:v100:2 -p debug\n";
  const auto a = fsub({"j.sh"}, sbatch).request.job;
  const auto b = fsub({"j.sh"}, aqs).request.job;
  const auto c = fsub({"-N", "2", "--ntasks-per-node", "4", "-c3", "--mem", "4G", "--gres=gpu:v100:2", "-p", "debug",
                       "j.sh"})
                     .request.job;
  for (const auto* j : {&a, &b, &c}) {
    REQUIRE(j->geometry);
    const auto& g = *j->geometry;
    CHECK(g.ntasks == 8);
    CHECK(g.cpus_per_task == 3);
    CHECK(g.ntasks_per_node == 4);
    CHECK(g.nodes_min == 2);
    CHECK(g.nodes_max == 2);
    CHECK(g.mem_per_node_mb == 4096);
    CHECK(g.gpus_per_node == 2);
    CHECK(g.partition == "debug");
    CHECK(j->min_pe == 24);
    CHECK(j->max_pe == 24);
  }
  CHECK(a.geometry == b.geometry);
  CHECK(a.geometry == c.geometry);
}

TEST_CASE("sbatch's size rules: -N alone is a task per node, -c multiplies, --mem=0 is whole nodes") {
  auto g = [](const args& a) { return *fsub(a).request.job.geometry; };
  CHECK(g({"-N", "3", "j.sh"}).ntasks == 3);
  CHECK(g({"-N", "1-4", "-n", "6", "j.sh"}).nodes_max == 4);
  CHECK(fsub({"-c", "24", "j.sh"}).request.job.min_pe == 24);
  CHECK(g({"-c", "24", "j.sh"}).ntasks == 1);
  CHECK(g({"--mem=0", "j.sh"}).exclusive);
  CHECK(g({"--mem-per-cpu=2000", "j.sh"}).mem_per_cpu_mb == 2000);
  CHECK(g({"--mem=500K", "j.sh"}).mem_per_node_mb == 1);
  CHECK(g({"--mem=1T", "j.sh"}).mem_per_node_mb == 1024 * 1024);
  CHECK(g({"--mem-per-cpu=3600mb", "j.sh"}).mem_per_cpu_mb == 3600);
  CHECK(g({"--mem=50GB", "j.sh"}).mem_per_node_mb == 50 * 1024);
  CHECK(g({"-N", "2", "--gpus=3", "j.sh"}).gpus_per_node == 2);
  // A later --mem replaces a script's --mem-per-cpu (Slurm: command line wins).
  const auto m = fsub({"--mem=1G", "j.sh"}, "#!/bin/sh\n#SBATCH --mem-per-cpu=100\n").request.job.geometry;
  CHECK(m->mem_per_node_mb == 1024);
  CHECK_FALSE(m->mem_per_cpu_mb);
  const auto shrunk = fsub({"-N", "4", "-n", "2", "j.sh"});
  CHECK(shrunk.request.job.geometry->nodes_min == 2);
  CHECK(shrunk.warnings.back() == "can't run 2 tasks on 4 nodes, setting nodes to 2");
  CHECK(fsub_error({"-N", "2", "-n", "10", "--ntasks-per-node=2", "j.sh"}).find("need 5 nodes") != std::string::npos);
  CHECK(fsub_error({"-N", "3-2", "j.sh"}).find("below the minimum") != std::string::npos);
  CHECK(fsub_error({"--mem=lots", "j.sh"}).find("--mem") != std::string::npos);
  // No geometry option: AQS's own sizing, sent without a geometry.
  CHECK_FALSE(fsub({"--min", "2", "--max", "4", "--adaptive", "j.sh"}).request.job.geometry);
}

TEST_CASE("options AQS records but does not act on are accepted everywhere with one warning; --account and --qos are acted on") {
  const std::string script =
      "#!/bin/sh\n"
      "#SBATCH --account=proj1 --qos=normal\n"
      "#SBATCH --mail-type=END,FAIL\n"
      "#SBATCH --mail-type=ALL\n"
      "#SBATCH --hint=nomultithread -J x\n"
      "#SBATCH --export=ALL\n"
      "echo\n";
  const auto d = parse_directives(script);
  CHECK(d.options.job_name == "x");
  REQUIRE(d.warnings.size() == 2);
  CHECK(d.warnings[0] == "script line 3: --mail-type=END,FAIL is recorded; AQS does not act on it");
  CHECK(d.warnings[1] == "script line 5: --hint=nomultithread is recorded; AQS does not act on it");
  const auto r = fsub({"-A", "proj2", "j.sh"}, script);
  CHECK(r.warnings.size() == 2);
  REQUIRE(r.request.job.geometry);
  CHECK(r.request.job.geometry->recorded.front() == "account=proj1");
  CHECK(r.request.job.geometry->recorded.back() == "account=proj2");
  CHECK(fsub({"--qos", "high", "j.sh"}).warnings.empty());
  CHECK(fsub({"--qos", "high", "j.sh"}).request.job.geometry->recorded.back() == "qos=high");
}

TEST_CASE("a misspelt option is an error that suggests the right one, in scripts and on the command line") {
  CHECK(fsub_error({"--ntask-per-node=2", "j.sh"}) ==
        "unknown option '--ntask-per-node' (did you mean '--ntasks-per-node'?) (see fsub --help)");
  CHECK(fsub_error({"j.sh"}, "#!/bin/sh\n#SBATCH --cpus-per-tsk=4\n") ==
        "script line 2: unknown option '--cpus-per-tsk' (did you mean '--cpus-per-task'?) in #SBATCH directive");
  CHECK(fsub_error({"--partiton=x", "j.sh"}).find("did you mean '--partition'") != std::string::npos);
  CHECK(fsub_error({"--frobnicate", "j.sh"}).find("did you mean") == std::string::npos);
  // What AQS cannot honour is refused saying why, never ignored.
  CHECK(fsub_error({"--hold", "j.sh"}).find("--hold") != std::string::npos);
  // ... naming the option once (not "(--hold) (--hold)").
  for (const char* o : {"--hold", "--nodefile=f", "--wait"}) {
    const std::string e = fsub_error({o, "j.sh"});
    const std::string name = std::string(o).substr(0, std::string(o).find('='));
    CAPTURE(e);
    CHECK(e.find("(" + name + ")") != std::string::npos);
    CHECK(e.find("(" + name + ")") == e.rfind("(" + name + ")"));
  }
  CHECK(fsub_error({"j.sh"}, "#!/bin/sh\n#SBATCH -F hosts\n").find("--nodelist") != std::string::npos);
}

TEST_CASE("-w/--nodelist and -x/--exclude are kept as host lists for aqsd's placement; a bad list is one line") {
  const auto r = fsub({"-w", "node[1-2]", "--exclude=node3", "j.sh"});
  REQUIRE(r.request.job.geometry);
  const auto& rec = r.request.job.geometry->recorded;
  CHECK(std::find(rec.begin(), rec.end(), "nodelist=node[1-2]") != rec.end());
  CHECK(std::find(rec.begin(), rec.end(), "exclude=node3") != rec.end());
  CHECK(r.warnings.empty());
  CHECK(fsub_error({"-w", "node[1-", "j.sh"}).find("invalid value 'node[1-' for --nodelist: not a host list") == 0);
}

TEST_CASE("--begin: Slurm's time forms become the job's begin time; a bad one is one line") {
  const auto r = fsub({"--begin=2030-01-01T08:00", "j.sh"});
  REQUIRE(r.request.job.geometry);
  REQUIRE(r.request.job.geometry->begin_time);
  CHECK(*r.request.job.geometry->begin_time == aqs::core::parse_begin_time("2030-01-01T08:00", 0));
  const auto e = fsub_error({"--begin=someday", "j.sh"});
  CHECK(e.find("invalid --begin time 'someday'") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("bad directives are errors naming the script line") {
  auto err = [](const std::string& script) {
    try {
      parse_directives(script);
    } catch (const usage_error& e) {
      return std::string(e.what());
    }
    FAIL("no usage_error for " << script);
    return std::string();
  };
  CHECK(err("#!/bin/sh\n#AQS --memory=4G\n") == "script line 2: unknown option '--memory' in #AQS directive");
  CHECK(err("#!/bin/sh\n\n#SBATCH -t forever\n").find("script line 3: ") == 0);
  CHECK(err("#!/bin/sh\n#SBATCH -J 'unterminated\n").find("unterminated quote") != std::string::npos);
  CHECK(err("#!/bin/sh\n#SBATCH --wrap=true\n").find("only allowed on the command line") != std::string::npos);
  CHECK(err("#!/bin/sh\n#AQS -n 2 stray\n").find("unexpected argument 'stray'") != std::string::npos);
  CHECK(err("#!/bin/sh\n#SBATCH --dependency=aftercorr:4\n").find("not supported") != std::string::npos);
  CHECK(err("#!/bin/sh\n#SBATCH --array=10-1\n").find("reversed array range") != std::string::npos);
  CHECK(err("#!/bin/sh\n#SBATCH -a 1-3%0\n").find("%0") != std::string::npos);
  CHECK(parse_directives("#!/bin/sh\n#SBATCH --array=0-99%10\n").options.array == "0-99%10");
}

TEST_CASE("lines that only look like directives are ordinary comments") {
  const auto d = parse_directives("#!/bin/sh\n#SBATCHX -n 4\n # SBATCH -n 5\n#AQSn 6\n  #SBATCH -n 7\necho\n");
  CHECK_FALSE(d.options.procs.has_value());
  CHECK(d.warnings.empty());
  // Without a shebang line the first line can be a directive (fsub refuses such scripts anyway).
  CHECK(parse_directives("#SBATCH -n 3\n").options.procs == 3);
}

TEST_CASE("frun parses options up to the command and builds an interactive request") {
  const auto cmd = parse_frun_command_line(args{"-n", "2", "-t", "5", "/usr/bin/env", "-i", "X=1", "printenv"});
  CHECK(cmd.command == args{"/usr/bin/env", "-i", "X=1", "printenv"});
  const auto req = build_frun_request(cmd, ctx());
  CHECK(req.job.interactive);
  CHECK(req.job.name == "env");
  CHECK(req.job.argv == cmd.command);
  CHECK_FALSE(req.job.script.has_value());
  CHECK(req.job.min_pe == 2);
  CHECK(req.job.walltime_s == 300);
  CHECK_THROWS_AS(parse_frun_command_line(args{"-n", "2"}), usage_error);
  CHECK_THROWS_AS(parse_frun_command_line(args{"--wrap", "x", "ls"}), usage_error);
  CHECK(parse_frun_command_line(args{"--", "-weird-name"}).command == args{"-weird-name"});
}

TEST_CASE("--mpi and --no-mpi are frun's, command-line only, and exclude each other") {
  CHECK(parse_frun_command_line(args{"--mpi", "./app"}).options.mpi == true);
  CHECK(parse_frun_command_line(args{"--no-mpi", "-n", "2", "./app"}).options.mpi == false);
  CHECK_FALSE(parse_frun_command_line(args{"./app"}).options.mpi.has_value());
  CHECK(parse_frun_command_line(args{"--mpi", "--mpi", "./app"}).options.mpi == true);
  // Options end at the command: its own --no-mpi is an argument.
  CHECK(parse_frun_command_line(args{"--mpi", "./app", "--no-mpi"}).command == args{"./app", "--no-mpi"});
  for (const args& a : {args{"--mpi", "--no-mpi", "./app"}, args{"--no-mpi", "-n", "2", "--mpi", "./app"}}) {
    try {
      parse_frun_command_line(a);
      FAIL("no usage_error");
    } catch (const usage_error& e) {
      CHECK(std::string(e.what()) == "give either --mpi or --no-mpi, not both");
    }
  }
  // --mpi=TYPE is srun's (a plugin): recorded with a warning, not frun's flag.
  const auto plugin = parse_frun_command_line(args{"--mpi=pmix", "./app"});
  CHECK_FALSE(plugin.options.mpi.has_value());
  CHECK(plugin.warnings.size() == 1);
  CHECK(fsub_error({"--mpi", "j.sh"}).find("'--mpi' is for frun") != std::string::npos);
  CHECK(fsub_error({"j.sh"}, "#!/bin/sh\n#AQS --no-mpi\n").find("'--no-mpi' is for frun") != std::string::npos);
  CHECK(frun_usage().find("--mpi") != std::string::npos);
  CHECK(frun_usage().find("--no-mpi") != std::string::npos);
  CHECK(fsub_usage().find("--mpi") == std::string::npos);
}

TEST_CASE("frun runs an MPI program under the mpirun found on PATH, and anything else as it is") {
  namespace fs = std::filesystem;
  aqs::test::temp_dir t;
  const fs::path bin = t.path() / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "mpirun") << "#!/bin/sh\n";
  fs::permissions(bin / "mpirun", fs::perms::owner_all);
  const fs::path probe(MPI_PROBE);
  const std::string probe_dir = probe.parent_path().string(), probe_name = probe.filename().string();
  submit_context c = ctx();
  c.cwd = "/";
  c.environment = {"PATH=/nonexistent:" + bin.string() + ":" + probe_dir + ":/usr/bin"};
  const std::string mpirun = (bin / "mpirun").string();
  const auto argv_of = [&](const args& a) { return build_frun_request(parse_frun_command_line(a), c).job.argv; };

  // Found by its path, through PATH, or relative to -D: the file the node will run.
  CHECK(argv_of({"-n", "8", MPI_PROBE, "10"}) == args{mpirun, MPI_PROBE, "10"});
  CHECK(argv_of({"-n", "8", probe_name}) == args{mpirun, probe_name});
  CHECK(argv_of({"-D", probe_dir, "./" + probe_name}) == args{mpirun, "./" + probe_name});
  CHECK(argv_of({"./" + probe_name}) == args{"./" + probe_name});  // not in "/": runs as given (and fails there)
  // The job keeps the program's name, not mpirun's.
  CHECK(build_frun_request(parse_frun_command_line(args{MPI_PROBE}), c).job.name == probe_name);
  // Not MPI: once, as before.
  CHECK(argv_of({"-n", "2", "echo", "hello"}) == args{"echo", "hello"});
  CHECK(argv_of({"-n", "2", "no-such-program"}) == args{"no-such-program"});
  // The overrides.
  CHECK(argv_of({"--no-mpi", "-n", "2", MPI_PROBE}) == args{MPI_PROBE});
  CHECK(argv_of({"--mpi", "-n", "2", "echo", "hello"}) == args{mpirun, "echo", "hello"});
  // Adaptive jobs start their ranks themselves.
  CHECK(argv_of({"--adaptive", "--min", "2", "--max", "4", MPI_PROBE}) == args{MPI_PROBE});
  CHECK(argv_of({"--adaptive", "--no-mpi", MPI_PROBE}) == args{MPI_PROBE});
  try {
    argv_of({"--adaptive", "--mpi", MPI_PROBE});
    FAIL("no usage_error");
  } catch (const usage_error& e) {
    CHECK(std::string(e.what()).find("--mpi is for rigid jobs") != std::string::npos);
  }
  // No mpirun to be found: one line saying so, before anything is submitted.
  c.environment = {"PATH=" + probe_dir + ":/nonexistent"};
  for (const args& a : {args{"-n", "4", probe_name}, args{"--mpi", "-n", "4", "/usr/bin/env"}}) {
    CAPTURE(a[2]);
    try {
      argv_of(a);
      FAIL("no usage_error");
    } catch (const usage_error& e) {
      const std::string what = e.what();
      CHECK(what.find("no mpirun on PATH") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  CHECK(argv_of({"--no-mpi", "-n", "4", probe_name}) == args{probe_name});
}

TEST_CASE("what fsub builds passes the server's own validation, or fsub refuses it first") {
  submit_context c = ctx();
  c.cwd = "relative/dir";  // a broken caller: the server would refuse this
  const auto cmd = parse_fsub_command_line(args{"j.sh"});
  try {
    build_fsub_request(cmd, "#!/bin/sh\n", c);
    FAIL("no error");
  } catch (const usage_error& e) {
    CHECK(std::string(e.what()).find("'job.workdir'") != std::string::npos);
  }
  c = ctx();
  c.submit_token = "abc-123";
  CHECK(build_fsub_request(cmd, "#!/bin/sh\n", c).request.job.submit_token == "abc-123");
}

TEST_CASE("merge keeps the base where the override is silent") {
  job_options base;
  base.procs = 4;
  base.job_name = "a";
  base.requeue = true;
  job_options over;
  over.requeue = false;
  merge(base, over);
  CHECK(base.procs == 4);
  CHECK(base.job_name == "a");
  CHECK(base.requeue == false);
  over.max_pe = 9;
  merge(base, over);
  CHECK_FALSE(base.procs.has_value());
  CHECK(base.max_pe == 9);
}

TEST_CASE("a dependency list longer than the protocol allows is refused at the first id too many") {
  // A script of a few MiB can name a million jobs in one line; going through
  // them pairwise for duplicates would keep fsub busy for minutes.
  std::string line = "#SBATCH --dependency=afterok";
  for (int id = 1; id <= 1'000'000; ++id) line += ":" + std::to_string(id);
  try {
    parse_directives("#!/bin/sh\n" + line + "\ntrue\n");
    FAIL("a million dependencies were accepted");
  } catch (const usage_error& e) {
    CHECK(std::string(e.what()).find("too many dependencies") != std::string::npos);
  }

  // Exactly the limit is fine; repeats count once and keep their first place.
  std::string most = "#AQS --dependency=afterok:7";
  for (std::size_t id = 1; id <= aqs::protocol::k_max_ids; ++id) most += ":" + std::to_string(id);
  const auto d = parse_directives("#!/bin/sh\n" + most + ",afterok:3\ntrue\n");
  REQUIRE(d.options.afterok.has_value());
  CHECK(d.options.afterok->size() == aqs::protocol::k_max_ids);
  CHECK(d.options.afterok->front() == 7);
  CHECK(d.options.afterok->at(1) == 1);
}

TEST_CASE("an adaptive job takes -c: --min/--max count ranks of that many processors") {
  const auto r = fsub({"--adaptive", "--min", "2", "--max", "8", "-c", "4", "j.sh"});
  const auto& j = r.request.job;
  CHECK(j.adaptive);
  CHECK(j.min_pe == 8);
  CHECK(j.max_pe == 32);
  REQUIRE(j.geometry);
  CHECK(j.geometry->cpus_per_task == 4);
  CHECK(j.geometry->ntasks == 2);
  // The same from #SBATCH lines, and -n N as N ranks.
  const auto d = fsub({"j.sh"}, "#!/bin/sh\n#SBATCH --cpus-per-task=2\n#AQS --adaptive --min 1 --max 3\n").request.job;
  CHECK(d.min_pe == 2);
  CHECK(d.max_pe == 6);
  CHECK(fsub({"--adaptive", "-n", "3", "-c", "2", "j.sh"}).request.job.max_pe == 6);
}

TEST_CASE("an adaptive job takes -N, --ntasks-per-node, --mem, --exclusive and GPUs as bounds kept as it changes size") {
  const auto r = fsub({"--adaptive", "--min", "2", "--max", "16", "-N", "2-4", "--ntasks-per-node=4", "--mem=500M",
                       "--gpus-per-node=1", "j.sh"});
  const auto& j = r.request.job;
  CHECK(j.adaptive);
  CHECK(j.min_pe == 2);
  CHECK(j.max_pe == 16);
  REQUIRE(j.geometry);
  CHECK(j.geometry->nodes_min == 2);
  CHECK(j.geometry->nodes_max == 4);
  CHECK(j.geometry->ntasks_per_node == 4);
  CHECK(j.geometry->mem_per_node_mb == 500);
  CHECK(j.geometry->gpus_per_node == 1);
  CHECK_FALSE(j.geometry->exclusive);
  // --exclusive, and --mem=0 as Slurm means it (all of each node).
  CHECK(fsub({"--adaptive", "--max", "8", "--exclusive", "j.sh"}).request.job.geometry->exclusive);
  CHECK(fsub({"--adaptive", "--max", "8", "--mem=0", "j.sh"}).request.job.geometry->exclusive);
  // --gpus N is a total over its minimum of nodes, as for a rigid job.
  CHECK(fsub({"--adaptive", "--min", "2", "--max", "8", "-N", "2", "--gpus=3", "j.sh"}).request.job.geometry->gpus_per_node ==
        2);
  // From #SBATCH lines too.
  const auto d = fsub({"j.sh"}, "#!/bin/sh\n#SBATCH -N 2\n#SBATCH --mem=1G\n#AQS --adaptive --min 2 --max 8\n").request.job;
  REQUIRE(d.geometry);
  CHECK(d.geometry->nodes_min == 2);
  CHECK(d.geometry->mem_per_node_mb == 1024);
}

TEST_CASE("bounds an adaptive job could not keep are refused in one line") {
  CHECK(fsub_error({"--adaptive", "--min", "1", "--max", "4", "-N", "2", "j.sh"}) ==
        "-N 2 needs a rank on each node: --min must be at least 2 (it is 1)");
  CHECK(fsub_error({"--adaptive", "--min", "9", "--max", "12", "-N", "1-2", "--ntasks-per-node=4", "j.sh"}) ==
        "--min 9 ranks at most 4 per node need more than the 2 nodes -N allows");
  CHECK(fsub_error({"--adaptive", "--min", "2", "--max", "4", "--mem-per-cpu=100", "j.sh"})
            .starts_with("--mem-per-cpu is not supported for an adaptive job"));
  CHECK(fsub_error({"--adaptive", "--max", "4", "--exclusive", "-c", "2", "j.sh"})
            .starts_with("--exclusive gives an adaptive job whole nodes"));
  CHECK(fsub_error({"--adaptive", "--max", "4", "--exclusive", "--ntasks-per-node=1", "j.sh"})
            .starts_with("--exclusive gives an adaptive job whole nodes"));
  CHECK(fsub_error({"--adaptive", "--max", "4", "--gpus=1", "--gpus-per-node=1", "j.sh"}).find("not both") !=
        std::string::npos);
  CHECK(fsub_error({"--adaptive", "--max", "100000", "-c", "64", "j.sh"}).find("more than") != std::string::npos);
}

TEST_CASE("--pref, --speedup and --resize-cost describe an adaptive job; out of range is one line, a rigid job ignores them") {
  const auto r = fsub({"--adaptive", "--min", "2", "--max", "16", "--pref", "8", "--speedup", "amdahl:0.95",
                       "--resize-cost", "10", "j.sh"});
  REQUIRE(r.request.job.geometry);
  CHECK(r.request.job.geometry->pref_pe == 8);
  CHECK(r.request.job.geometry->speedup == "amdahl:0.95");
  CHECK(r.request.job.geometry->resize_cost_s == 10);
  // -c 2: the preferred size counts ranks, the job's processors are twice that.
  const auto c2 = fsub({"--adaptive", "--min", "2", "--max", "16", "--pref", "8", "-c", "2", "j.sh"});
  CHECK(c2.request.job.geometry->pref_pe == 16);
  // In a script, as #AQS lines.
  const auto d = fsub({"j.sh"}, "#!/bin/sh\n#AQS --adaptive --min 1 --max 4 --pref 3\necho\n");
  CHECK(d.request.job.geometry->pref_pe == 3);
  CHECK(fsub_error({"--adaptive", "--min", "2", "--max", "16", "--pref", "20", "j.sh"}) ==
        "--pref 20 must be between --min 2 and --max 16");
  const auto rigid = fsub({"-n", "4", "--pref", "2", "j.sh"});
  REQUIRE(rigid.warnings.size() == 1);
  CHECK(rigid.warnings[0].find("describe an adaptive job") != std::string::npos);
  CHECK((!rigid.request.job.geometry || !rigid.request.job.geometry->pref_pe));
  CHECK(fsub_error({"--adaptive", "--min", "1", "--max", "4", "--speedup", "quadratic", "j.sh"}).find("--speedup") !=
        std::string::npos);
}
