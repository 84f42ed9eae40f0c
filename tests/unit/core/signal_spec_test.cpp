// signal_spec: Slurm's --signal=[{R|B}:]SIG[@TIME] values.
#include <doctest/doctest.h>

#include <csignal>

#include "core/signal_spec.hpp"

using namespace aqs;

namespace {

core::signal_spec ok(std::string_view text) {
  auto r = core::parse_signal_spec(text);
  REQUIRE_MESSAGE(std::holds_alternative<core::signal_spec>(r), std::string(text));
  return std::get<core::signal_spec>(r);
}

}  // namespace

TEST_CASE("--signal takes a name or number, B: for the batch shell alone, and @seconds (60 by default)") {
  CHECK(ok("USR1") == core::signal_spec{SIGUSR1, 60, false});
  CHECK(ok("SIGUSR2@30") == core::signal_spec{SIGUSR2, 30, false});
  CHECK(ok("B:USR1@90") == core::signal_spec{SIGUSR1, 90, true});
  CHECK(ok("b:term") == core::signal_spec{SIGTERM, 60, true});
  CHECK(ok("R:10@0") == core::signal_spec{10, 0, false});
  CHECK(ok("RB:2@65535") == core::signal_spec{2, 65535, true});
  for (const char* bad : {"", "B:", ":USR1", "X:USR1", "USR3", "0", "65", "USR1@", "USR1@-1", "USR1@65536", "USR1@1m",
                          "B:USR1@90@1"}) {
    CAPTURE(bad);
    auto r = core::parse_signal_spec(bad);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).starts_with("invalid --signal '"));
  }
}

TEST_CASE("a job's --signal is read from its recorded Slurm options, the last one counting") {
  CHECK_FALSE(core::signal_spec_of({"account=x"}));
  CHECK(core::signal_spec_of({"signal=USR1", "account=x", "signal=B:USR2@5"}) == core::signal_spec{SIGUSR2, 5, true});
  CHECK_FALSE(core::signal_spec_of({"signal=nonsense"}));
}
