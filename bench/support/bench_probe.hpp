// bench_probe: what the end-to-end benchmarks use to act as a user and to
// look at a daemon from outside: throwaway users, a command run as one,
// a process's resident memory and descriptors, a file a daemon writes once
// it listens, and one authenticated HTTP GET on a fresh connection.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::bench {

// An unprivileged user for a benchmark: made with useradd --system when it
// did not exist (`made`), removed by remove_user only then.
struct bench_user {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  bool made = false;
};
// Throws std::runtime_error when the user cannot be made or found.
bench_user make_user(const std::string& name);
void remove_user(const bench_user& u);

// argv (argv[0] a path) run as uid/gid with no supplementary groups, in
// `cwd` when given; its stdout. Throws std::runtime_error naming the
// program and its wait status when it does not exit 0.
std::string run_as(uid_t uid, gid_t gid, const std::vector<std::string>& argv, const std::string& cwd = "");
inline std::string run_as(const bench_user& u, const std::vector<std::string>& argv) {
  return run_as(u.uid, u.gid, argv);
}

// Writes `text` to `p` (replacing it) and gives it `perms`; throws when it cannot.
void write_text(const std::filesystem::path& p, const std::string& text,
                std::filesystem::perms perms = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

// Trailing newlines, carriage returns and blanks removed.
std::string trim(std::string s);
// The last line of `s`, trimmed (what ftoken prints last: the token).
std::string last_line(std::string s);

// The first process whose argv[0] ends with `program` and whose command
// line holds `mention` (a state directory), or -1.
pid_t find_process(std::string_view program, std::string_view mention);
// Its resident memory in MiB (0 when it is gone) and its open descriptors.
double rss_mb(pid_t pid);
int open_fds(pid_t pid);

// The text of `p` once it is there and not empty (a daemon writes its port
// or pid there once it listens); throws after `limit` with `log`'s text.
std::string wait_file(const std::filesystem::path& p, std::chrono::seconds limit, const std::filesystem::path& log);

// Writes all of `bytes` to a socket (stops at an error).
void send_all(int fd, std::string_view bytes);
// One GET of `target` with the bearer `token` on a fresh connection to
// 127.0.0.1:port, Connection: close: the answer's status (0: none within
// 30 s, or no connection).
unsigned http_get(int port, const std::string& token, const std::string& target);

}  // namespace aqs::bench
