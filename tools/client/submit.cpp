// submit: retries with the same token; the store makes them idempotent.
#include "client/submit.hpp"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace aqs::client {

cmdline::submit_context this_process_context() {
  cmdline::submit_context ctx;
  ctx.cwd = std::filesystem::current_path().string();
  for (char** e = environ; *e != nullptr; ++e) ctx.environment.emplace_back(*e);
  ctx.submit_token = random_token();
  return ctx;
}

bool retryable(const client_error& e) noexcept {
  return !e.code() || *e.code() == protocol::error_code::internal;
}

std::int64_t submit(const std::string& socket_path, protocol::submit request, const submit_retry& retry) {
  if (!request.job.submit_token) request.job.submit_token = random_token();
  std::chrono::milliseconds delay = retry.first_delay;
  bool sent = false;
  for (int attempt = 1;; ++attempt) {
    try {
      connection c(socket_path, retry.answer_within);
      request.id = c.next_id();
      sent = true;  // from here on aqsd may have stored it
      const protocol::ok reply = c.call_ok(request);
      const auto r = protocol::read_reply<protocol::submit_reply>(reply);
      if (retry.on_warning) {
        for (const auto& w : r.warnings) retry.on_warning(w);
      }
      return r.job_id;
    } catch (const client_timeout& e) {
      // The connection holds and aqsd has the request: it is still working
      // on it (a big array), and sending it again would only add to that.
      if (sent) {
        throw client_error(std::string(e.what()) +
                           "; it may still store the job (fjobs shows it), so it was not sent again");
      }
      throw;
    } catch (const client_error& e) {
      if (!sent || !retryable(e) || attempt >= std::max(1, retry.attempts)) throw;
      if (retry.on_retry) retry.on_retry(attempt + 1, e.what());
    } catch (const protocol::protocol_error& e) {
      // Not retried: the job may well be stored, and aqsd would answer the same.
      throw client_error(std::string("unreadable reply from aqsd: ") + e.what());
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, retry.max_delay);
  }
}

submit_retry retry_told_as(const std::string& name) {
  submit_retry retry;
  retry.on_retry = [name](int attempt, const std::string& why) {
    std::fprintf(stderr, "%s: %s; sending the job again (attempt %d)\n", name.c_str(), why.c_str(), attempt);
  };
  retry.on_warning = [name](const std::string& w) { std::fprintf(stderr, "%s: warning: %s\n", name.c_str(), w.c_str()); };
  return retry;
}

void print_job_id(std::int64_t id, bool json, bool parsable, const char* submitted) {
  if (json) {
    std::printf("{\"job_id\":%lld}\n", static_cast<long long>(id));
  } else if (parsable) {
    std::printf("%lld\n", static_cast<long long>(id));
  } else {
    std::printf("%s %lld\n", submitted, static_cast<long long>(id));
  }
}

std::optional<std::string> read_script(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path)) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int test_submit(const std::string& socket_path, protocol::submit request, bool json, bool slurm_style) {
  connection c(socket_path);
  request.id = c.next_id();
  request.test_only = true;
  request.job.submit_token.reset();  // nothing is stored: nothing to find again
  const nlohmann::json r = c.call(request);
  if (json) {
    std::printf("%s\n", r.dump().c_str());
    return r.at("start_s").is_null() ? 1 : 0;
  }
  const std::int64_t procs = r.value("procs", std::int64_t{0});
  if (r.at("start_s").is_null()) {
    std::fprintf(stderr, "%s: Job would not start as things stand (it needs nodes or jobs the estimate does not foresee)\n",
                 slurm_style ? "sbatch" : "fsub");
    return 1;
  }
  const auto at = static_cast<std::time_t>(r.at("start_s").get<double>());
  std::tm tm{};
  ::localtime_r(&at, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  if (slurm_style) {
    std::fprintf(stderr, "sbatch: Job 0 to start at %s using %lld processors\n", when, static_cast<long long>(procs));
  } else {
    std::printf("Job would start at %s (in %.0f s) on %lld processors\n", when, r.at("start_in_s").get<double>(),
                static_cast<long long>(procs));
  }
  return 0;
}

}  // namespace aqs::client
