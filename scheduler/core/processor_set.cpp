// processor_set: word-wise set operations and the text and range forms.
#include "core/processor_set.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace aqs::core {

namespace {

std::size_t words_for(std::size_t bits) {
  return (bits + processor_set::word_bits - 1) / processor_set::word_bits;
}

// Without -mpopcnt, std::popcount is a call into libgcc per word; counting
// is the core's hottest operation (sizes and free counts on every decision),
// so the portable bit-parallel count is inlined instead.
inline std::size_t popcount64(processor_set::word x) noexcept {
#if defined(__POPCNT__)
  return static_cast<std::size_t>(std::popcount(x));
#else
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<std::size_t>((x * 0x0101010101010101ULL) >> 56);
#endif
}

processor_set::word mask_from(std::size_t bit) {  // bits >= bit within a word
  return ~processor_set::word{0} << bit;
}

// Calls f(w, m) for each word w that processors [first, last) reach, m
// being their bits in it.
template <class F>
void for_each_word_in(std::size_t first, std::size_t last, F f) {
  constexpr std::size_t bits = processor_set::word_bits;
  while (first < last) {
    const std::size_t lo = first % bits;
    const std::size_t hi = std::min<std::size_t>(bits, lo + (last - first));
    processor_set::word m = mask_from(lo);
    if (hi < bits) m &= ~mask_from(hi);
    f(first / bits, m);
    first += hi - lo;
  }
}

// Up to `n` of the set bits of `bits`, the lowest or the highest ones; `n`
// goes down by as many as were taken.
processor_set::word take_bits(processor_set::word bits, std::size_t& n, bool highest) {
  using word = processor_set::word;
  const auto c = popcount64(bits);
  if (c <= n) {
    n -= c;
    return bits;
  }
  word out = 0;
  for (; n > 0; --n) {
    const auto top = processor_set::word_bits - 1 - static_cast<std::size_t>(std::countl_zero(bits));
    const word one = highest ? word{1} << top : bits & (~bits + 1);
    out |= one;
    bits &= ~one;
  }
  return out;
}

}  // namespace

processor_set::processor_set(std::size_t size) : size_(size), words_(words_for(size), 0) {}

processor_set processor_set::from_string(std::string_view bits) {
  processor_set s(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] == '1') {
      s.words_[i / word_bits] |= word{1} << (i % word_bits);
    } else if (bits[i] != '0') {
      throw std::invalid_argument("processor map: character " + std::to_string(i) +
                                  " is not 0 or 1");
    }
  }
  return s;
}

processor_set processor_set::from_ranges(std::size_t size, std::string_view text) {
  processor_set s(size);
  if (text.empty()) return s;
  auto parse_number = [&](std::string_view part, std::string_view whole) {
    std::size_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc{} || ptr != part.data() + part.size() || part.empty()) {
      throw std::invalid_argument("processor ranges: bad number in '" + std::string(whole) + "'");
    }
    return v;
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view part = text.substr(pos, comma - pos);
    std::size_t dash = part.find('-');
    std::size_t lo = parse_number(part.substr(0, dash), part);
    std::size_t hi = dash == std::string_view::npos ? lo : parse_number(part.substr(dash + 1), part);
    if (hi < lo) throw std::invalid_argument("processor ranges: reversed range '" + std::string(part) + "'");
    if (hi >= size) {
      throw std::invalid_argument("processor ranges: processor " + std::to_string(hi) +
                                  " is beyond the cluster's " + std::to_string(size));
    }
    s.set_range(lo, hi + 1);
    pos = comma + 1;
  }
  return s;
}

processor_set processor_set::range(std::size_t size, std::size_t first, std::size_t last) {
  processor_set s(size);
  s.set_range(first, last);
  return s;
}

void processor_set::resize(std::size_t size) {
  size_ = size;
  words_.resize(words_for(size), 0);
  trim_tail();
}

void processor_set::fit_size(std::size_t size) {
  if (size > size_) {
    size_ = size;
    words_.resize(words_for(size), 0);
  }
}

void processor_set::trim_tail() noexcept {
  if (size_ % word_bits != 0 && !words_.empty()) {
    words_.back() &= ~mask_from(size_ % word_bits);
  }
}

std::size_t processor_set::count() const noexcept {
  std::size_t n = 0;
  for (word w : words_) n += popcount64(w);
  return n;
}

bool processor_set::none() const noexcept {
  return std::all_of(words_.begin(), words_.end(), [](word w) { return w == 0; });
}

bool processor_set::test(std::size_t i) const noexcept {
  return i < size_ && (words_[i / word_bits] >> (i % word_bits) & 1U) != 0;
}

void processor_set::set(std::size_t i) {
  if (i >= size_) throw std::out_of_range("processor " + std::to_string(i) + " out of range");
  words_[i / word_bits] |= word{1} << (i % word_bits);
}

void processor_set::reset(std::size_t i) {
  if (i >= size_) throw std::out_of_range("processor " + std::to_string(i) + " out of range");
  words_[i / word_bits] &= ~(word{1} << (i % word_bits));
}

void processor_set::set_range(std::size_t first, std::size_t last) {
  if (last > size_ || first > last) throw std::out_of_range("processor range out of range");
  for_each_word_in(first, last, [this](std::size_t w, word m) { words_[w] |= m; });
}

void processor_set::clear() noexcept { std::fill(words_.begin(), words_.end(), 0); }

std::size_t processor_set::find_next(std::size_t from) const noexcept {
  if (from >= size_) return npos;
  std::size_t w = from / word_bits;
  word bits = words_[w] & mask_from(from % word_bits);
  while (true) {
    if (bits != 0) return w * word_bits + static_cast<std::size_t>(std::countr_zero(bits));
    if (++w >= words_.size()) return npos;
    bits = words_[w];
  }
}

processor_set processor_set::lowest(std::size_t n) const {
  processor_set out(size_);
  for (std::size_t w = 0; w < words_.size() && n > 0; ++w) out.words_[w] = take_bits(words_[w], n, false);
  return out;
}

processor_set processor_set::highest(std::size_t n) const {
  processor_set out(size_);
  for (std::size_t w = words_.size(); w-- > 0 && n > 0;) out.words_[w] = take_bits(words_[w], n, true);
  return out;
}

std::size_t processor_set::count_common(const processor_set& o) const noexcept {
  std::size_t n = 0, words = std::min(words_.size(), o.words_.size());
  for (std::size_t w = 0; w < words; ++w) n += popcount64(words_[w] & o.words_[w]);
  return n;
}

std::size_t processor_set::find_next_unset(std::size_t from) const noexcept {
  if (from >= size_) return npos;
  std::size_t w = from / word_bits;
  word holes = ~words_[w] & mask_from(from % word_bits);
  while (true) {
    if (holes != 0) {
      std::size_t i = w * word_bits + static_cast<std::size_t>(std::countr_zero(holes));
      return i < size_ ? i : npos;
    }
    if (++w >= words_.size()) return npos;
    holes = ~words_[w];
  }
}

std::size_t processor_set::last() const noexcept {
  for (std::size_t w = words_.size(); w-- > 0;) {
    if (words_[w] != 0) {
      return w * word_bits + word_bits - 1 - static_cast<std::size_t>(std::countl_zero(words_[w]));
    }
  }
  return npos;
}

std::size_t processor_set::count_range(std::size_t first, std::size_t last) const noexcept {
  last = std::min(last, size_);
  std::size_t n = 0;
  for_each_word_in(first, last, [this, &n](std::size_t w, word m) { n += popcount64(words_[w] & m); });
  return n;
}

processor_set& processor_set::operator|=(const processor_set& o) {
  fit_size(o.size_);
  for (std::size_t i = 0; i < o.words_.size(); ++i) words_[i] |= o.words_[i];
  return *this;
}

processor_set& processor_set::operator&=(const processor_set& o) {
  fit_size(o.size_);
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= i < o.words_.size() ? o.words_[i] : 0;
  return *this;
}

processor_set& processor_set::operator-=(const processor_set& o) {
  fit_size(o.size_);
  for (std::size_t i = 0; i < o.words_.size(); ++i) words_[i] &= ~o.words_[i];
  return *this;
}

bool processor_set::intersects(const processor_set& o) const noexcept {
  std::size_t n = std::min(words_.size(), o.words_.size());
  for (std::size_t i = 0; i < n; ++i) {
    if ((words_[i] & o.words_[i]) != 0) return true;
  }
  return false;
}

bool processor_set::is_subset_of(const processor_set& o) const noexcept {
  for (std::size_t i = 0; i < words_.size(); ++i) {
    word other = i < o.words_.size() ? o.words_[i] : 0;
    if ((words_[i] & ~other) != 0) return false;
  }
  return true;
}

bool operator==(const processor_set& a, const processor_set& b) noexcept {
  return a.size_ == b.size_ && a.words_ == b.words_;
}

std::vector<std::size_t> processor_set::members() const {
  std::vector<std::size_t> out;
  out.reserve(count());
  for_each([&](std::size_t i) { out.push_back(i); });
  return out;
}

std::string processor_set::to_string() const {
  std::string s(size_, '0');
  for_each([&](std::size_t i) { s[i] = '1'; });
  return s;
}

std::string processor_set::to_ranges() const {
  std::string out;
  std::size_t i = first();
  while (i != npos) {
    std::size_t j = i;
    while (j + 1 < size_ && test(j + 1)) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
    if (j > i) {
      out += '-';
      out += std::to_string(j);
    }
    i = find_next(j + 1);
  }
  return out;
}

}  // namespace aqs::core
