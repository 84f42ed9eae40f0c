// strategy: the name -> factory table (flux-sched's queue_policy_factory habit).
#include "core/strategy.hpp"

#include <map>
#include <stdexcept>

#include "core/easy_backfill.hpp"
#include "core/equipartition.hpp"
#include "core/fcfs.hpp"

namespace aqs::core {

namespace {

std::map<std::string, strategy_factory, std::less<>>& registry() {
  // Built on first use, so registration does not depend on static-init order.
  static std::map<std::string, strategy_factory, std::less<>> table = {
      {"fcfs", [] { return std::unique_ptr<strategy>(std::make_unique<fcfs>()); }},
      {"easy", [] { return std::unique_ptr<strategy>(std::make_unique<easy_backfill>()); }},
      {"equipartition", [] { return std::unique_ptr<strategy>(std::make_unique<equipartition>()); }},
  };
  return table;
}

}  // namespace

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<strategy> make_strategy(std::string_view name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown policy '" + std::string(name) + "' (known: " + known + ")");
  }
  return it->second();
}

void register_strategy(std::string name, strategy_factory factory) {
  registry()[std::move(name)] = std::move(factory);
}

}  // namespace aqs::core
