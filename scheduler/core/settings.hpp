// settings: a daemon's tunable numbers (caps, sizes, deadlines), each
// declared once with its config-file key, its flag, its unit, its bounds and
// where its value goes. aqsd's port limits and per-user caps (aqs.conf) and
// faucetsd's limits are tables of these; the flags, their help, the
// config-file lines and the one-line errors all come from the table.
// Pure: the caller reads the file and registers the flags.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace aqs::core {

struct setting {
  enum class unit : unsigned char { count, bytes, seconds, number };
  using target_ptr = std::variant<std::size_t*, std::int64_t*, std::chrono::milliseconds*, double*>;

  std::string_view key;   // the config file's Key (case-insensitive); empty: a flag only
  std::string_view flag;  // --flag
  unit kind = unit::count;
  std::string_view help;
  target_ptr target;
  // Inclusive bounds, in the unit (seconds for a time). A seconds setting
  // whose least is 0 may be off.
  double least = 1;
  double most = static_cast<double>(std::int64_t{1} << 40);
  std::string typed;  // the flag's value as typed; empty if not given
};

// Shorthands for the tables.
setting count_setting(std::string_view key, std::string_view flag, std::size_t& v, std::string_view help,
                      double least = 1, double most = static_cast<double>(std::int64_t{1} << 40));
setting count_setting(std::string_view key, std::string_view flag, std::int64_t& v, std::string_view help,
                      double least = 1, double most = static_cast<double>(std::int64_t{1} << 40));
setting bytes_setting(std::string_view key, std::string_view flag, std::size_t& v, std::string_view help,
                      double least = 1, double most = static_cast<double>(std::int64_t{1} << 40));
setting bytes_setting(std::string_view key, std::string_view flag, std::int64_t& v, std::string_view help,
                      double least = 1, double most = static_cast<double>(std::int64_t{1} << 40));
setting seconds_setting(std::string_view key, std::string_view flag, std::chrono::milliseconds& v,
                        std::string_view help, double least = 0.001, double most = 86400.0 * 7);
// A decimal number (a rate, a speed score).
setting number_setting(std::string_view key, std::string_view flag, double& v, std::string_view help, double least,
                       double most);

// The setting's name in messages: its key, or its flag when it has no key.
std::string_view setting_name(const setting& s);
// Its present value as it would be typed ("16M", "5", "0.5").
std::string setting_text(const setting& s);
// Its flag's help: the help, the default and the config key.
std::string setting_help(const setting& s);

// Parses `text` for `s` (counts whole; bytes with K, M or G, powers of
// 1024; seconds and numbers a decimal) within its bounds: the value in the unit, or the
// one-line reason ("HttpHeadTimeout takes seconds (more than 0 to 604800),
// not 'soon'").
std::variant<double, std::string> setting_value(const setting& s, std::string_view text);
// Stores `value` (from setting_value) where `s` points.
void store_setting(const setting& s, double value);

// Applies every typed flag of `table`: nullopt, or "--flag: why" of the
// first bad one (nothing after it is applied).
std::optional<std::string> apply_typed_flags(std::vector<setting>& table);

// Takes the lines of `table`'s keys out of a config text, each replaced by
// an empty line so that the rest's parser still names the right line
// numbers, and returns the rest. A line may hold several of the keys, but no
// other words. With `apply`, each value goes where its setting points unless
// its flag was typed (a flag wins); without, the lines are only checked and
// taken out. Throws std::invalid_argument "FILE:LINE: why".
std::string take_setting_lines(std::string_view text, std::string_view file, std::vector<setting>& table, bool apply);

}  // namespace aqs::core
