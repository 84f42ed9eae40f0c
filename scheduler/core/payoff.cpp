// payoff: the common pool under the pay-for-itself, no-rebalancing and interval rules.
#include "core/payoff.hpp"

#include "core/common_pool.hpp"

namespace aqs::core {

plan payoff::schedule(const scheduler& s, double now) const {
  pool_rules rules;
  rules.payoff = true;
  rules.min_interval = params_.min_resize_interval;
  rules.default_cost = params_.default_resize_cost;
  return plan_common_pool(s, now, rules);
}

plan payoff_lxf::schedule(const scheduler& s, double now) const {
  pool_rules rules;
  rules.payoff = true;
  rules.min_interval = params_.min_resize_interval;
  rules.default_cost = params_.default_resize_cost;
  rules.lxf_backfill = true;
  return plan_common_pool(s, now, rules);
}

}  // namespace aqs::core
