// pref_common_pool: the common pool with no resize-cost rules.
#include "core/policies.hpp"

#include "core/common_pool.hpp"

namespace aqs::core {

plan pref_common_pool::schedule(const scheduler& s, double now) const { return plan_common_pool(s, now, pool_rules{}); }

}  // namespace aqs::core
