// policies: the built-in broker policies, made by name through make_broker (internal to aqs::faucets_broker).
#pragma once

#include <cstdint>
#include <memory>

#include "broker/broker.hpp"

namespace aqs::faucets::policies {

std::unique_ptr<broker> make_random(std::uint64_t seed);
std::unique_ptr<broker> make_fastest_cpu();
std::unique_ptr<broker> make_fastest_queue();
std::unique_ptr<broker> make_data();
std::unique_ptr<broker> make_earliest_start();
std::unique_ptr<broker> make_contract();

}  // namespace aqs::faucets::policies
