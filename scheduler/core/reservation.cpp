// reservation: choosing a new reservation's processors (reservation.hpp).
#include "core/reservation.hpp"

#include <string>

#include "core/scheduler.hpp"

namespace aqs::core {

namespace {

std::string count_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " processor" : " processors"); }

}  // namespace

reservation_choice choose_reservation_procs(const scheduler& s, const reservation_ask& ask,
                                            const std::vector<advance_reservation>& others) {
  reservation_choice out;
  const std::size_t size = s.machine().size();
  if (!(ask.end > ask.start)) {
    out.error = "the reservation ends before it starts";
    return out;
  }
  // Who stands where: processors of overlapping reservations and of nodes
  // not UP are out; the others are free, adaptive, rigid ending in time, or
  // rigid in the way.
  processor_set taken(size);
  for (const advance_reservation& o : others) {
    if (o.start < ask.end && ask.start < o.end) {
      processor_set p = o.procs;
      p.resize(size);
      taken |= p;
    }
  }
  processor_set up = s.machine().procs_in(node_state::up);
  processor_set adaptive(size), rigid_done(size), rigid_in_way(size);
  for (const auto& [end, id] : s.holding_by_end()) {
    const job& j = s.get(id);
    processor_set p = j.procs | j.target;
    if (j.adaptive()) {
      adaptive |= p;
    } else if (j.estimated_end <= ask.start || ask.ignore_jobs) {
      rigid_done |= p;
    } else {
      rigid_in_way |= p;
    }
  }
  const processor_set free = up - s.held() - taken;
  const processor_set candidates = (free | ((adaptive | rigid_done) & up)) - taken - rigid_in_way;
  if (ask.procs) {
    processor_set want = *ask.procs;
    want.resize(size);
    if (!want.any()) {
      out.error = "the reservation has no processors";
      return out;
    }
    if (want.intersects(taken)) {
      out.error = "its processors overlap another reservation at that time";
      return out;
    }
    if (!want.is_subset_of(up)) {
      out.error = "some of its nodes are not up";
      return out;
    }
    if (want.intersects(rigid_in_way)) {
      std::string ids;
      for (const auto& [end, id] : s.holding_by_end()) {
        const job& j = s.get(id);
        if (!j.adaptive() && j.estimated_end > ask.start && (j.procs | j.target).intersects(want)) {
          if (!ids.empty()) ids += ",";
          ids += std::to_string(id);
        }
      }
      out.error = "job " + ids + " runs on its nodes past its start (IGNORE_JOBS would overlap them)";
      return out;
    }
    out.procs = std::move(want);
    return out;
  }
  if (ask.count == 0) {
    out.error = "the reservation asks for no processors";
    return out;
  }
  if (candidates.count() < ask.count) {
    out.error = "only " + count_text(candidates.count()) + " can be set aside from its start, " +
                count_text(ask.count) + " asked";
    return out;
  }
  // Lowest numbers first within each class: free, adaptive, rigid ending in time.
  processor_set chosen(size);
  std::size_t need = ask.count;
  for (const processor_set& cls : {free - rigid_in_way, (adaptive & up) - taken - chosen, (rigid_done & up) - taken}) {
    const processor_set pick = cls - chosen;
    for (std::size_t p = 0; p < size && need > 0; ++p) {
      if (pick.test(p)) {
        chosen.set(p);
        --need;
      }
    }
    if (need == 0) break;
  }
  out.procs = std::move(chosen);
  return out;
}

}  // namespace aqs::core
