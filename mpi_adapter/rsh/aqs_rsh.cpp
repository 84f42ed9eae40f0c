// aqs-rsh: OpenMPI's launch agent (plm_rsh_agent) inside an AQS job. mpirun
// calls it as `aqs-rsh HOST COMMAND...` to start its daemon on another host;
// instead of ssh it asks aqsd, speaking for the job, to have the node agent
// of the job's node on HOST run COMMAND there (as the job's user, pinned to
// the job's cpus there, ended with the job), and lives until that process
// ends, exiting with its status, as ssh would. Killing aqs-rsh ends it too.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "job_link.hpp"
#include "protocol/messages.hpp"

extern char** environ;

namespace {

int fail(const std::string& why, int code) {
  std::fprintf(stderr, "aqs-rsh: %s\n", why.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace aqs;
  if (argc < 3 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(argc < 3 ? stderr : stdout,
                 "usage: aqs-rsh HOST COMMAND...\n"
                 "OpenMPI's launch agent in an AQS job (OMPI_MCA_plm_rsh_agent): runs COMMAND on HOST\n"
                 "through the job's node agent there, and ends with it.\n");
    return argc < 3 ? 2 : 0;
  }
  const auto where = runtime::control_address_from_env();
  if (!where) return fail("not inside an AQS job (AQS_JOB_ID and AQS_SOCKET or AQS_SERVER are not set)", 2);
  std::string command;
  for (int i = 2; i < argc; ++i) {
    if (i > 2) command += ' ';
    command += argv[i];
  }
  protocol::remote_exec req;
  req.id = 2;
  req.job_id = where->job_id;
  req.host = argv[1];
  req.command = command;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && eq != *e) req.environment.emplace_back(*e);
  }
  try {
    runtime::job_link link = runtime::connect_job(*where, true, 1);
    runtime::send_all(link.fd, protocol::encode(req));
    std::vector<std::string> frames = std::move(link.early);
    char buf[65536];
    for (;;) {
      for (const auto& f : frames) {
        const auto m = protocol::parse_message(f);
        if (const auto* e = std::get_if<protocol::error>(&m)) {
          return fail("cannot start on " + req.host + ": " + e->message, 255);
        }
        if (const auto* s = std::get_if<protocol::step_ended>(&m)) {
          ::close(link.fd);
          if (s->signal) return 128 + static_cast<int>(*s->signal);
          return static_cast<int>(s->exit_code.value_or(0));
        }
      }
      frames.clear();
      const ssize_t n = ::read(link.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("lost the connection to aqsd", 255);
      link.decoder.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
    }
  } catch (const std::exception& e) {
    return fail(e.what(), 255);
  }
}
