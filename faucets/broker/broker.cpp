// broker: the registry of broker policies by name and the eligibility rule they share.
#include "broker/broker.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

#include "broker/policies.hpp"

namespace aqs::faucets {

namespace {

constexpr std::string_view k_names[] = {"random", "fastest-cpu", "fastest-queue", "data", "earliest-start",
                                       "contract"};

}  // namespace

std::vector<std::string_view> broker_names() { return {std::begin(k_names), std::end(k_names)}; }

std::unique_ptr<broker> make_broker(std::string_view name, std::uint64_t seed) {
  if (name == "random") return policies::make_random(seed);
  if (name == "fastest-cpu") return policies::make_fastest_cpu();
  if (name == "fastest-queue") return policies::make_fastest_queue();
  if (name == "data") return policies::make_data();
  if (name == "earliest-start") return policies::make_earliest_start();
  if (name == "contract") return policies::make_contract();
  // plugin:NAME is made by faucetsd's plugin_host (plugin_host.hpp), which needs the admin's plugin directory.
  if (name.starts_with("plugin:")) throw std::invalid_argument("broker policy '" + std::string(name) + "' is a plugin: give faucetsd --plugin-dir");
  std::string known;
  for (std::string_view n : k_names) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw std::invalid_argument("unknown broker policy '" + std::string(name) + "' (known: " + known + ")");
}

double contract_value(const contract_terms& c, double completion_in_s) {
  if (!(completion_in_s > c.deadline_in_s)) return std::max(c.value, 0.0);
  if (!(c.decay_s > 0)) return 0;
  const double left = 1.0 - (completion_in_s - c.deadline_in_s) / c.decay_s;
  return left > 0 ? c.value * left : 0.0;
}

bool can_ever_run(const job_ask& job, const cluster_view& cluster) {
  return cluster.up && cluster.max_job_procs >= job.min_pe && cluster.max_job_gpus >= job.gpus;
}

}  // namespace aqs::faucets
