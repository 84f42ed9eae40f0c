// Fuzz target for the #AQS/#SBATCH directive parser and fsub's request building: options or one usage_error line, never anything else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cmdline/job_options.hpp"
#include "cmdline/usage_error.hpp"
#include "protocol/messages.hpp"

using namespace aqs::cmdline;

namespace {

[[noreturn]] void violated() { std::abort(); }

void one_line(const std::string& s) {
  if (s.empty() || s.find('\n') != std::string::npos) violated();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view script(reinterpret_cast<const char*>(data), size);
  try {
    const script_directives d = parse_directives(script);
    for (const auto& w : d.warnings) one_line(w);
  } catch (const usage_error& e) {
    one_line(e.what());
  }

  // The whole of fsub's path for a script file: directives, merge, checks,
  // and the server's own validation. What passes must encode.
  static const submit_context ctx{"/home/alice/run", {"PATH=/usr/bin:/bin", "HOME=/home/alice"}, "tok-1"};
  fsub_command_line cmd;
  cmd.script_path = "/home/alice/run/job.sh";
  try {
    const fsub_request r = build_fsub_request(cmd, script, ctx);
    for (const auto& w : r.warnings) one_line(w);
    (void)aqs::protocol::encode(r.request);
  } catch (const usage_error& e) {
    one_line(e.what());
  }
  return 0;
}
