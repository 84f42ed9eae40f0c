// aqs-publish: publishes named values from a job's script (a residual, a
// step count) for the job's live charts in aqsd's dashboard, as the runtime
// shim's AQS_Publish does for an MPI program. It speaks for the job over
// the job's own channel (runtime/src/job_link): the Unix socket, where the
// kernel vouches that its uid owns the job, or TCP with the job's token.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "job_link.hpp"
#include "protocol/messages.hpp"

using namespace aqs;

namespace {

constexpr const char* k_usage =
    "usage: aqs-publish NAME VALUE [NAME VALUE ...]\n"
    "       aqs-publish --stdin\n"
    "\n"
    "Inside an AQS job: publishes named values for the job's live charts (aqsd's\n"
    "dashboard, GET /api/v1/jobs/ID/values), e.g. aqs-publish residual 1.3e-4.\n"
    "\n"
    "  --stdin     read \"NAME VALUE\" lines from standard input until its end, sending\n"
    "              them as they come (for a loop that prints its progress)\n"
    "  -h, --help  this text\n"
    "\n"
    "A NAME is 1 to 64 letters, digits, '_', '.', ':' or '-'; a VALUE a finite number.\n"
    "aqsd keeps each name's newest points and drops what a job publishes past its\n"
    "rate; aqs-publish says how many were dropped.\n";

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

protocol::published_value parse_value(const std::string& name, const std::string& text) {
  if (!protocol::valid_value_name(name)) {
    throw usage_error("bad name '" + name.substr(0, 80) + "': 1.." + std::to_string(protocol::k_max_value_name) +
                      " letters, digits, '_', '.', ':' or '-'");
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) {
    throw usage_error("bad value '" + text.substr(0, 80) + "' for " + name + ": a finite number");
  }
  return {name, v, std::nullopt};
}

// Reads frames until the reply to `id`.
protocol::message reply_to(runtime::job_link& link, std::int64_t id) {
  std::vector<std::string> frames = std::move(link.early);
  link.early.clear();
  for (;;) {
    for (auto& f : frames) {
      auto m = protocol::parse_message(f);
      if (protocol::id_of(m) == id &&
          (std::holds_alternative<protocol::ok>(m) || std::holds_alternative<protocol::error>(m))) {
        return m;
      }
    }
    frames.clear();
    char buf[4096];
    const ssize_t n = ::recv(link.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("aqsd closed the connection");
    link.decoder.feed(std::string_view(buf, static_cast<std::size_t>(n)), frames);
  }
}

struct totals {
  std::size_t sent = 0, dropped = 0;
};

void send_batch(runtime::job_link& link, std::int64_t job, std::int64_t id, std::vector<protocol::published_value> v,
                totals& t) {
  protocol::publish p;
  p.id = id;
  p.job_id = job;
  p.values = std::move(v);
  t.sent += p.values.size();
  runtime::send_all(link.fd, protocol::encode(p));
  const auto r = reply_to(link, id);
  if (const auto* e = std::get_if<protocol::error>(&r)) throw std::runtime_error("aqsd refused: " + e->message);
  const auto& ok = std::get<protocol::ok>(r);
  t.dropped += ok.result.value("dropped", std::size_t{0});
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    bool from_stdin = false;
    std::vector<protocol::published_value> values;
    if (args.empty()) throw usage_error("nothing to publish (see aqs-publish --help)");
    if (args[0] == "-h" || args[0] == "--help") {
      std::fputs(k_usage, stdout);
      return 0;
    }
    if (args[0] == "--stdin") {
      if (args.size() != 1) throw usage_error("--stdin takes no NAME VALUE pairs");
      from_stdin = true;
    } else {
      if (args.size() % 2 != 0) throw usage_error("NAME VALUE pairs expected; '" + args.back().substr(0, 80) + "' has no value");
      if (args.size() / 2 > protocol::k_max_publish_batch) {
        throw usage_error("at most " + std::to_string(protocol::k_max_publish_batch) + " values at once (or use --stdin)");
      }
      for (std::size_t i = 0; i < args.size(); i += 2) {
        if (args[i].starts_with("-") && !args[i].starts_with("--") && args[i].size() > 1 && !std::isdigit(args[i][1])) {
          throw usage_error("unknown option '" + args[i].substr(0, 80) + "' (see aqs-publish --help)");
        }
        values.push_back(parse_value(args[i], args[i + 1]));
      }
    }
    const auto where = runtime::control_address_from_env();
    if (!where) throw std::runtime_error("not inside an AQS job (no AQS_JOB_ID with AQS_SOCKET or AQS_SERVER)");
    // A launcher connection: it speaks for the job, and is not its shim
    // (it is sent no maps and takes no resize).
    runtime::job_link link = runtime::connect_job(*where, true, 1);
    std::int64_t id = 2;
    totals t;
    if (!from_stdin) {
      send_batch(link, where->job_id, id++, std::move(values), t);
    } else {
      std::string line;
      std::size_t lineno = 0;
      while (std::getline(std::cin, line)) {
        ++lineno;
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        const auto gap = line.find_first_of(" \t", first);
        const auto second = gap == std::string::npos ? gap : line.find_first_not_of(" \t", gap);
        if (second == std::string::npos) {
          throw usage_error("line " + std::to_string(lineno) + ": want NAME VALUE");
        }
        auto last = line.find_last_not_of(" \t\r");
        const std::string name = line.substr(first, gap - first);
        const std::string value = line.substr(second, last + 1 - second);
        try {
          // One line at a time: a loop printing its progress is seen as it goes.
          send_batch(link, where->job_id, id++, {parse_value(name, value)}, t);
        } catch (const usage_error& e) {
          throw usage_error("line " + std::to_string(lineno) + ": " + e.what());
        }
      }
    }
    ::close(link.fd);
    if (t.dropped > 0) {
      std::fprintf(stderr, "aqs-publish: %zu of %zu values dropped (past the job's rate or its number of names)\n",
                   t.dropped, t.sent);
    }
    return 0;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "aqs-publish: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aqs-publish: %s\n", e.what());
    return 1;
  }
}
