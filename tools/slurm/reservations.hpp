// reservations: Slurm's reservation commands over aqsd's `reservations`
// message: `scontrol create|update|delete reservation KEY=VALUE...`,
// `scontrol show reservation [NAME]` and `sinfo -T`, in Slurm's words and
// layouts. Pure: words in, the request's JSON record or the text out.
#pragma once

#include <ctime>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace aqs::slurm {

// The record of `scontrol create|update reservation` from its KEY=VALUE
// words (keys any case): ReservationName= (or Reservation=), StartTime=
// (now, now+60[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], as --begin),
// Duration= (minutes, or [D-]HH:MM:SS as Slurm's time limits) or EndTime=,
// Nodes= (a host list; ALL is refused: name them) or CoreCnt=, Users=,
// Accounts= (comma lists), Flags= (MAINT, IGNORE_JOBS). Anything else,
// a bad value or a missing name throws command_error (one line).
nlohmann::json reservation_record(std::span<const std::string> words, std::time_t now, bool create);

// `scontrol show reservation`: each of `reply.reservations` in scontrol's
// key=value layout, a blank line after each (one line each with oneliner);
// "No reservations in the system\n" when there are none.
std::string scontrol_show_reservations(const nlohmann::json& reply, bool oneliner, const char* time_format = nullptr);

// `sinfo -T`: RESV_NAME STATE START_TIME END_TIME DURATION NODELIST.
std::string sinfo_reservations(const nlohmann::json& reply, bool header, const char* time_format = nullptr);

}  // namespace aqs::slurm
