// strategy: the name -> factory table (flux-sched's queue_policy_factory habit).
#include "core/strategy.hpp"

#include <map>
#include <stdexcept>

#include "core/policies.hpp"
#include "core/payoff.hpp"

namespace aqs::core {

namespace {

using param_factory = std::function<std::unique_ptr<strategy>(const strategy_params&)>;

std::map<std::string, param_factory, std::less<>>& registry() {
  // Built on first use, so registration does not depend on static-init order.
  static std::map<std::string, param_factory, std::less<>> table = {
      {"fcfs", [](const strategy_params&) { return std::unique_ptr<strategy>(std::make_unique<fcfs>()); }},
      {"easy", [](const strategy_params&) { return std::unique_ptr<strategy>(std::make_unique<easy_backfill>()); }},
      {"equipartition",
       [](const strategy_params&) { return std::unique_ptr<strategy>(std::make_unique<equipartition>()); }},
      {"pref_common_pool",
       [](const strategy_params&) { return std::unique_ptr<strategy>(std::make_unique<pref_common_pool>()); }},
      {"payoff", [](const strategy_params& p) { return std::unique_ptr<strategy>(std::make_unique<payoff>(p)); }},
      {"payoff_lxf",
       [](const strategy_params& p) { return std::unique_ptr<strategy>(std::make_unique<payoff_lxf>(p)); }},
  };
  return table;
}

}  // namespace

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<strategy> make_strategy(std::string_view name) { return make_strategy(name, strategy_params{}); }

std::unique_ptr<strategy> make_strategy(std::string_view name, const strategy_params& params) {
  if (!(params.min_resize_interval >= 0) || !(params.default_resize_cost >= 0)) {
    throw std::invalid_argument("policy '" + std::string(name) + "': the resize interval and cost must be >= 0");
  }
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown policy '" + std::string(name) + "' (known: " + known + ")");
  }
  return it->second(params);
}

void register_strategy(std::string name, strategy_factory factory) {
  registry()[std::move(name)] = [f = std::move(factory)](const strategy_params&) { return f(); };
}

}  // namespace aqs::core
