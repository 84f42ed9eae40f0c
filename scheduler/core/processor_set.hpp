// processor_set: a set of cluster processors as a word-wise bitvector.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aqs::core {

// Processors are numbered 0..size()-1 across the cluster (node registration
// order, cores within a node in order). The text form is the Faucets one:
// "00011100" is processors 3, 4 and 5, processor 0 first. The range form is
// "3-5,9". Binary operations accept sets of different sizes: missing bits are
// zero and the result has the larger size.
class processor_set {
public:
  using word = std::uint64_t;
  static constexpr std::size_t word_bits = 64;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  processor_set() = default;
  // An empty set over a universe of `size` processors.
  explicit processor_set(std::size_t size);

  // Parses the 0/1 text form. Throws std::invalid_argument naming the first
  // character that is neither '0' nor '1'.
  static processor_set from_string(std::string_view bits);
  // Parses "0-3,7,9-10" over a universe of `size`. Throws
  // std::invalid_argument on bad syntax, a reversed range, or a processor
  // >= size. The empty string is the empty set.
  static processor_set from_ranges(std::size_t size, std::string_view ranges);
  // Processors [first, last) set, over a universe of `size`.
  static processor_set range(std::size_t size, std::size_t first, std::size_t last);

  std::size_t size() const noexcept { return size_; }
  // Grows (or shrinks, dropping processors beyond) the universe.
  void resize(std::size_t size);

  std::size_t count() const noexcept;
  bool none() const noexcept;
  bool any() const noexcept { return !none(); }

  // Out-of-range indices: test() is false, set()/reset() throw std::out_of_range.
  bool test(std::size_t i) const noexcept;
  void set(std::size_t i);
  void reset(std::size_t i);
  void set_range(std::size_t first, std::size_t last);  // [first, last)
  void clear() noexcept;

  // Lowest member >= from, or npos.
  std::size_t find_next(std::size_t from) const noexcept;
  std::size_t first() const noexcept { return find_next(0); }
  // Lowest non-member >= from (< size()), or npos. With find_next this walks
  // the runs of a set word by word, which placement uses to find ranges.
  std::size_t find_next_unset(std::size_t from) const noexcept;
  // Highest member, or npos when empty.
  std::size_t last() const noexcept;
  // The lowest n members (fewer if the set is smaller).
  processor_set lowest(std::size_t n) const;
  // The highest n members (fewer if the set is smaller).
  processor_set highest(std::size_t n) const;
  // Number of members in [first, last).
  std::size_t count_range(std::size_t first, std::size_t last) const noexcept;

  processor_set& operator|=(const processor_set& o);
  processor_set& operator&=(const processor_set& o);
  processor_set& operator-=(const processor_set& o);  // set difference
  friend processor_set operator|(processor_set a, const processor_set& b) { return a |= b; }
  friend processor_set operator&(processor_set a, const processor_set& b) { return a &= b; }
  friend processor_set operator-(processor_set a, const processor_set& b) { return a -= b; }

  bool intersects(const processor_set& o) const noexcept;
  // |this & o| without building the intersection.
  std::size_t count_common(const processor_set& o) const noexcept;
  bool is_subset_of(const processor_set& o) const noexcept;
  // Equal members and equal size.
  friend bool operator==(const processor_set& a, const processor_set& b) noexcept;

  // Calls f(i) for each member, in increasing order.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      word bits = words_[w];
      while (bits != 0) {
        f(w * word_bits + static_cast<std::size_t>(std::countr_zero(bits)));
        bits &= bits - 1;
      }
    }
  }
  std::vector<std::size_t> members() const;

  std::string to_string() const;  // "00011100"
  std::string to_ranges() const;  // "3-5"

private:
  void fit_size(std::size_t size);  // grow to at least size
  void trim_tail() noexcept;        // clear bits beyond size_

  std::size_t size_ = 0;
  std::vector<word> words_;
};

}  // namespace aqs::core
