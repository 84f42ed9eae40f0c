// job_listing: the jobs of a list_jobs request, page after page (all of
// them, or the newest N), kept as the JSON text aqsd sent: fjobs --json
// prints that text as it is, the table parses it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "client/client_connection.hpp"
#include "client/json_skim.hpp"
#include "protocol/results.hpp"

namespace aqs::client {

// One reply: its text and where each job object is in it.
struct job_page {
  std::string body;
  std::vector<text_span> jobs;
};

struct job_listing {
  std::vector<job_page> pages;  // by increasing job id
  bool older_left_out = false;  // `limit` stopped before the oldest matching job
};

// Every job `request` matches (its paging fields are set here), or with
// `limit` only the newest `limit` of them. Throws client_error (aqsd's
// refusal, a lost connection, an unreadable reply).
job_listing list_job_pages(connection& c, protocol::list_jobs request, std::optional<std::int64_t> limit);

// Every job `request` matches, oldest first, handed to `page` one reply at a
// time as it arrives (nothing is kept): fjobs --json --all prints 100,000
// jobs without holding them. Throws as list_job_pages.
void for_each_job_page(connection& c, protocol::list_jobs request, const std::function<void(const job_page&)>& page);

// The job objects of one page as one run of text ("{...},{...}"), as aqsd
// wrote them; empty for an empty page.
std::string_view page_jobs_text(const job_page& p);

// The one JSON array of fjobs --json (one line): the job objects as aqsd
// wrote them, which is what jobs_json() of the parsed jobs prints.
std::string jobs_json_text(const job_listing& l);

// The jobs parsed and validated (protocol::parse_job_info). Throws
// client_error on a job aqsd should not have sent.
std::vector<protocol::job_info> parse_jobs(const job_listing& l);

// Task `task` of array `array` among `jobs`: the job that runs it once it
// is split off its array's compact record (`job_id`), else whether a
// pending record of the array still holds unsplit tasks (`in_record`; aqsd
// splits them off as they become eligible). fkill, scancel and fjobs
// --history ARRAY_TASK resolve a task this one way.
struct array_task_found {
  std::optional<std::int64_t> job_id;
  std::optional<std::int64_t> record_id;  // the array's pending record, if any
};
array_task_found find_array_task(const std::vector<protocol::job_info>& jobs, std::int64_t array, std::int64_t task);

}  // namespace aqs::client
