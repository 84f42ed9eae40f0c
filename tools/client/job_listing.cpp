// job_listing: paging by id, forwards (after_id) or from the newest down
// (before_id).
#include "client/job_listing.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace aqs::client {

namespace {

struct page_info {
  job_page page;
  bool more = false;
};

page_info read_page(std::string body) {
  page_info out;
  try {
    for (const auto& [key, span] : object_members(body)) {
      if (key == "more") out.more = span.in(body) == "true";
      if (key == "jobs") out.page.jobs = array_elements(body, span);
    }
  } catch (const std::invalid_argument& e) {
    throw client_error(std::string("unreadable job list from aqsd: ") + e.what());
  }
  out.page.body = std::move(body);
  return out;
}

std::int64_t id_of(const job_page& p, const text_span& job) {
  const std::string_view text = job.in(p.body);
  try {
    for (const auto& [key, span] : object_members(text)) {
      if (key != "id") continue;
      const std::string_view v = span.in(text);
      std::int64_t id = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), id);
      if (r.ec == std::errc() && r.ptr == v.data() + v.size()) return id;
    }
  } catch (const std::invalid_argument&) {
  }
  throw client_error("unreadable job list from aqsd: a job without a valid id");
}

}  // namespace

job_listing list_job_pages(connection& c, protocol::list_jobs request, std::optional<std::int64_t> limit) {
  job_listing out;
  request.after_id.reset();
  request.before_id.reset();
  request.newest = limit.has_value();
  std::int64_t left = limit.value_or(0);
  while (true) {
    if (limit) request.limit = std::min(left, protocol::k_max_list);
    request.id = c.next_id();
    page_info p = read_page(c.call_text(request));
    const bool got = !p.page.jobs.empty();
    if (got) {
      if (limit) {
        request.before_id = id_of(p.page, p.page.jobs.front());
        left -= static_cast<std::int64_t>(p.page.jobs.size());
      } else {
        request.after_id = id_of(p.page, p.page.jobs.back());
      }
      out.pages.push_back(std::move(p.page));
    }
    if (!p.more || !got) break;
    if (limit && left <= 0) {
      out.older_left_out = true;
      break;
    }
  }
  if (limit) std::reverse(out.pages.begin(), out.pages.end());
  return out;
}

void for_each_job_page(connection& c, protocol::list_jobs request, const std::function<void(const job_page&)>& page) {
  request.after_id.reset();
  request.before_id.reset();
  request.newest = false;
  request.limit.reset();
  while (true) {
    request.id = c.next_id();
    page_info p = read_page(c.call_text(request));
    if (p.page.jobs.empty()) break;
    request.after_id = id_of(p.page, p.page.jobs.back());
    page(p.page);
    if (!p.more) break;
  }
}

std::string_view page_jobs_text(const job_page& p) {
  if (p.jobs.empty()) return {};
  const std::size_t from = p.jobs.front().offset;
  const std::size_t to = p.jobs.back().offset + p.jobs.back().size;
  return std::string_view(p.body).substr(from, to - from);
}

std::string jobs_json_text(const job_listing& l) {
  std::size_t size = 2;
  for (const auto& p : l.pages) size += p.body.size();
  std::string out;
  out.reserve(size);
  out += '[';
  bool first = true;
  for (const auto& p : l.pages) {
    if (p.jobs.empty()) continue;
    if (!first) out += ',';
    first = false;
    out += page_jobs_text(p);
  }
  out += ']';
  return out;
}

std::vector<protocol::job_info> parse_jobs(const job_listing& l) {
  std::vector<protocol::job_info> out;
  std::size_t n = 0;
  for (const auto& p : l.pages) n += p.jobs.size();
  out.reserve(n);
  for (const auto& p : l.pages) {
    for (const auto& j : p.jobs) {
      try {
        out.push_back(protocol::parse_job_info(nlohmann::json::parse(j.in(p.body)), "jobs[" + std::to_string(out.size()) + "]"));
      } catch (const nlohmann::json::exception& e) {
        throw client_error(std::string("unreadable job list from aqsd: ") + e.what());
      } catch (const protocol::protocol_error& e) {
        throw client_error(std::string("unreadable job list from aqsd: ") + e.what());
      }
    }
  }
  return out;
}

array_task_found find_array_task(const std::vector<protocol::job_info>& jobs, std::int64_t array, std::int64_t task) {
  array_task_found found;
  for (const auto& j : jobs) {
    if (j.array_job_id != array) continue;
    if (j.array_task_id == task) found.job_id = j.id;
    if (!j.array_task_id && !core::is_final(j.state)) found.record_id = j.id;
  }
  return found;
}

}  // namespace aqs::client
