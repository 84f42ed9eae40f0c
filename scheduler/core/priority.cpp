// priority: the multifactor factors, their weighted sum and the weights' settings.
#include "core/priority.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "core/scheduler.hpp"
#include "core/text_util.hpp"
#include "core/time_limit.hpp"
#include "core/usage_error.hpp"

namespace aqs::core {

namespace {

double clamp01(double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 0.0; }

std::uint64_t weight_sum(const priority_weights& w) {
  return std::uint64_t{w.age} + w.fairshare + w.job_size + w.partition + w.qos;
}

}  // namespace

std::optional<std::string> set_priority_setting(priority_weights& w, std::string_view key, std::string_view value) {
  const std::string k = ascii_lower(key);
  priority_weights next = w;
  std::uint32_t* slot = nullptr;
  std::string name;
  if (k == "priorityweightage") slot = &next.age, name = "PriorityWeightAge";
  if (k == "priorityweightfairshare") slot = &next.fairshare, name = "PriorityWeightFairshare";
  if (k == "priorityweightjobsize") slot = &next.job_size, name = "PriorityWeightJobSize";
  if (k == "priorityweightpartition") slot = &next.partition, name = "PriorityWeightPartition";
  if (k == "priorityweightqos") slot = &next.qos, name = "PriorityWeightQOS";
  if (slot) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc{} || p != value.data() + value.size() || v > k_max_priority_weight_sum) {
      return name + " must be a whole number from 0 to " + std::to_string(k_max_priority_weight_sum) + ", not '" +
             std::string(value) + "'";
    }
    *slot = static_cast<std::uint32_t>(v);
    if (weight_sum(next) > k_max_priority_weight_sum) {
      return "the PriorityWeight* settings add up to more than " + std::to_string(k_max_priority_weight_sum);
    }
    w = next;
    return std::string{};
  }
  if (k == "prioritymaxage" || k == "prioritydecayhalflife") {
    const char* n = k == "prioritymaxage" ? "PriorityMaxAge" : "PriorityDecayHalfLife";
    std::int64_t s = 0;
    try {
      s = parse_time_limit(value);
    } catch (const usage_error&) {
      return std::string(n) + " takes minutes or [days-]hours:minutes:seconds, not '" + std::string(value) + "'";
    }
    (k == "prioritymaxage" ? w.max_age_s : w.half_life_s) = static_cast<double>(s);
    return std::string{};
  }
  if (k == "priorityfavorsmall") {
    const std::string v = ascii_lower(value);
    if (v != "yes" && v != "no") return "PriorityFavorSmall takes YES or NO, not '" + std::string(value) + "'";
    w.favor_small = v == "yes";
    return std::string{};
  }
  return std::nullopt;
}

priority_factors factors_of(const priority_input& in, const priority_context& ctx, const priority_weights& w,
                            double now) {
  priority_factors f;
  const double age = now - in.submit_time;
  f.age = age <= 0 ? 0 : (w.max_age_s <= 0 ? 1 : clamp01(age / w.max_age_s));
  f.fairshare = clamp01(in.fairshare);
  const double procs = static_cast<double>(std::max<std::size_t>(ctx.cluster_procs, 1));
  const double share = clamp01(static_cast<double>(in.size) / procs);
  f.job_size = w.favor_small ? clamp01(1.0 - share + 1.0 / procs) : share;
  f.partition = ctx.max_partition_priority ? clamp01(double(in.partition_priority) / ctx.max_partition_priority) : 0;
  f.qos = ctx.max_qos_priority ? clamp01(double(in.qos_priority) / ctx.max_qos_priority) : 0;
  return f;
}

int priority_value(const priority_factors& f, const priority_weights& w, int base) {
  if (w.all_zero()) return base;
  const double sum = static_cast<double>(base) + w.age * f.age + w.fairshare * f.fairshare +
                     w.job_size * f.job_size + w.partition * f.partition + w.qos * f.qos;
  const double r = std::round(sum);
  if (r >= static_cast<double>(INT_MAX)) return INT_MAX;
  if (r <= static_cast<double>(INT_MIN)) return INT_MIN;
  return static_cast<int>(r);
}

priority_input priority_input_of(job_id id, const job_request& req, double fairshare) {
  priority_input p;
  p.id = id;
  p.submit_time = req.submit_time;
  p.size = req.min_pe;
  p.fairshare = fairshare;
  return p;
}

std::vector<job_priority> compute_priorities(const std::vector<priority_input>& jobs, const priority_context& ctx,
                                             const priority_weights& w, double now) {
  std::vector<job_priority> out;
  out.reserve(jobs.size());
  for (const priority_input& in : jobs) {
    job_priority p;
    p.id = in.id;
    p.factors = factors_of(in, ctx, w, now);
    p.value = priority_value(p.factors, w, in.base);
    out.push_back(p);
  }
  return out;
}

std::size_t apply_priorities(scheduler& s, const std::vector<job_priority>& p) {
  std::size_t changed = 0;
  for (const job_priority& jp : p) {
    const job* j = s.find(jp.id);
    if (!j || j->req.priority == jp.value) continue;
    s.set_priority(jp.id, jp.value);
    ++changed;
  }
  return changed;
}

}  // namespace aqs::core
