// records: summaries and records.
#include "store/records.hpp"

#include <charconv>

namespace aqs::store {

namespace {
constexpr std::string_view k_claimed = "claimed:";
}

std::string claim_control(std::int64_t epoch) { return std::string(k_claimed) + std::to_string(epoch); }

std::optional<std::int64_t> claimed_epoch(std::string_view control) {
  if (!control.starts_with(k_claimed)) return std::nullopt;
  const std::string_view digits = control.substr(k_claimed.size());
  std::int64_t epoch = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), epoch);
  if (ec != std::errc() || end != digits.data() + digits.size() || epoch < 1) return std::nullopt;
  return epoch;
}

job_summary summary_of(const job_record& r) {
  job_summary s;
  s.id = r.id;
  s.user_name = r.request.user_name;
  s.uid = r.request.uid;
  s.name = r.request.name;
  s.min_pe = r.request.min_pe;
  s.max_pe = r.request.max_pe;
  s.adaptive = r.request.adaptive;
  s.walltime_s = r.request.walltime_s;
  s.priority = r.request.priority;
  s.requeue = r.request.requeue;
  s.dependencies = r.request.dependencies;
  s.geometry = r.request.geometry;
  s.submit_token = r.request.submit_token;
  s.status = r.status;
  return s;
}

job_record record_of(job_summary s) {
  job_record j;
  j.id = s.id;
  j.status = std::move(s.status);
  job_submission& q = j.request;
  q.user_name = std::move(s.user_name);
  q.uid = s.uid;
  q.name = std::move(s.name);
  q.min_pe = s.min_pe;
  q.max_pe = s.max_pe;
  q.adaptive = s.adaptive;
  q.walltime_s = s.walltime_s;
  q.priority = s.priority;
  q.requeue = s.requeue;
  q.dependencies = std::move(s.dependencies);
  q.geometry = std::move(s.geometry);
  q.submit_token = std::move(s.submit_token);
  return j;
}

}  // namespace aqs::store
