#pragma once
// What ranks that each hold a slice of the vertices send one another: typed arrays packed into the byte messages of
// Communicator::all_to_all and read back in the order they were packed (each array is its length and then its values),
// and the slices themselves.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <type_traits>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/error.hpp"
#include "nj/core/types.hpp"

namespace nj {

// Packs arrays into one message: whole, with put, or value by value, with start_array and add into a message whose
// size was reserved, so that large messages are written in place without a copy or a reallocation.
class Writer {
 public:
  template <typename T>
  static constexpr std::size_t bytes_of_array(std::size_t count) {
    return sizeof(std::int64_t) + count * sizeof(T);
  }
  void reserve(std::size_t bytes) { bytes_.reserve(bytes); }

  template <typename T>
  void put(std::span<const T> values) {
    start_array<T>(values.size());
    append(values.data(), values.size_bytes());
  }
  template <typename T>
  void put(const std::vector<T>& values) {
    put(std::span<const T>(values));
  }
  // An array of `count` values, which `count` calls of add (or of add_values) follow.
  template <typename T>
  void start_array(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto stored = static_cast<std::int64_t>(count);
    append(&stored, sizeof(stored));
  }
  template <typename T>
  void add(const T& value) {
    append(&value, sizeof(T));
  }
  template <typename T>
  void add_values(std::span<const T> values) {
    append(values.data(), values.size_bytes());
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t size) {
    if (size == 0) return;
    const std::size_t at = bytes_.size();
    bytes_.resize(at + size);
    std::memcpy(bytes_.data() + at, data, size);
  }
  std::vector<std::byte> bytes_;
};

// An array of a message, read where it lies (a message's arrays need not be aligned for their values).
template <typename T>
class PackedArray {
 public:
  PackedArray(const std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::size_t size() const { return size_; }
  T operator[](std::size_t i) const {
    T value;
    std::memcpy(&value, data_ + i * sizeof(T), sizeof(T));
    return value;
  }
  // Values [first, first + count) to `out`.
  void copy_to(std::size_t first, std::size_t count, T* out) const {
    if (count > 0) std::memcpy(out, data_ + first * sizeof(T), count * sizeof(T));
  }

 private:
  const std::byte* data_;
  std::size_t size_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  // The next array, in the message.
  template <typename T>
  PackedArray<T> next() {
    static_assert(std::is_trivially_copyable_v<T>);
    std::int64_t count = 0;
    copy(&count, sizeof(count));
    NJ_EXPECTS(count >= 0 && static_cast<std::size_t>(count) * sizeof(T) <= bytes_.size() - at_,
               "a message holds {} bytes past {}, not {} values", bytes_.size() - at_, at_, count);
    const PackedArray<T> values(bytes_.data() + at_, static_cast<std::size_t>(count));
    at_ += values.size() * sizeof(T);
    return values;
  }
  // The next array, copied out.
  template <typename T>
  std::vector<T> take() {
    const PackedArray<T> packed = next<T>();
    std::vector<T> values(packed.size());
    packed.copy_to(0, values.size(), values.data());
    return values;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void copy(void* out, std::size_t size) {
    NJ_EXPECTS(size <= bytes_.size() - at_, "a message ends {} bytes short", size - (bytes_.size() - at_));
    if (size > 0) std::memcpy(out, bytes_.data() + at_, size);
    at_ += size;
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

// One message to each rank, written by writers[rank], exchanged.
inline std::vector<std::vector<std::byte>> exchange(std::vector<Writer>& writers, Communicator& comm) {
  std::vector<std::vector<std::byte>> to_each;
  to_each.reserve(writers.size());
  for (Writer& writer : writers) to_each.push_back(writer.take());
  return comm.all_to_all(std::move(to_each));
}

// The ranks' slices of the vertices (or of any items they share): rank r holds [first(r), first(r + 1)), as even as
// whole items allow.
class Slices {
 public:
  Slices(std::int64_t vertices, int ranks) : vertices_(vertices), ranks_(ranks) {}
  // vertices · rank / ranks, without forming the product, which a count near 2^63 (pairs drawn) would overflow.
  std::int64_t first(int rank) const { return vertices_ / ranks_ * rank + vertices_ % ranks_ * rank / ranks_; }
  std::int64_t rows(int rank) const { return first(rank + 1) - first(rank); }
  int owner(gid_t v) const {
    auto rank = static_cast<int>(v * ranks_ / vertices_);
    while (first(rank + 1) <= v) ++rank;
    return rank;
  }
  int ranks() const { return ranks_; }

 private:
  std::int64_t vertices_;
  int ranks_;
};

// `values` ascending without repeats, as ask_owners takes ids.
template <typename T>
std::vector<T> sorted_unique(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// The index of `id` in `sorted` (ascending, without repeats), which holds it.
inline std::size_t index_of(std::span<const gid_t> sorted, gid_t id) {
  const auto at = std::lower_bound(sorted.begin(), sorted.end(), id);
  NJ_EXPECTS(at != sorted.end() && *at == id, "{} is not among the {} ids", id, sorted.size());
  return static_cast<std::size_t>(at - sorted.begin());
}

// Where each rank's run of `sorted` ids (ascending) ends: rank q's are [ends[q - 1], ends[q]), from 0.
inline std::vector<std::size_t> owner_run_ends(std::span<const gid_t> sorted, const Slices& slices) {
  std::vector<std::size_t> ends;
  ends.reserve(static_cast<std::size_t>(slices.ranks()));
  auto begin = sorted.begin();
  for (int q = 0; q < slices.ranks(); ++q) {
    begin = std::lower_bound(begin, sorted.end(), slices.first(q + 1));
    ends.push_back(static_cast<std::size_t>(begin - sorted.begin()));
  }
  NJ_EXPECTS(ends.empty() || ends.back() == sorted.size(), "{} of {} ids lie past the last slice",
             sorted.size() - ends.back(), sorted.size());
  return ends;
}

// The entries of `values` that `keep` keeps, ascending without repeats, in an array sized once: what the kept
// entries take while they are sorted, then what the distinct ones take.
template <typename T, typename Keep>
std::vector<T> sorted_unique_where(std::span<const T> values, Keep keep) {
  std::vector<T> kept;
  kept.reserve(static_cast<std::size_t>(std::count_if(values.begin(), values.end(), keep)));
  std::copy_if(values.begin(), values.end(), std::back_inserter(kept), keep);
  kept = sorted_unique(std::move(kept));
  kept.shrink_to_fit();
  return kept;
}

// What the owners of `ids` (ascending, without repeats) say of them: `value_of(id)` on the rank whose slice holds
// each id, returned in the order of the ids. A collective of every rank. Each owner's ids are a run of `ids` (the
// slices are ascending too), sent as they lie; a rank holds its questions out and in, then the answers.
template <typename T, typename ValueOf>
std::vector<T> ask_owners(std::span<const gid_t> ids, const Slices& slices, Communicator& comm, ValueOf value_of) {
  std::vector<Writer> writers(static_cast<std::size_t>(slices.ranks()));
  std::size_t begin = 0;
  const std::vector<std::size_t> ends = owner_run_ends(ids, slices);
  for (std::size_t q = 0; q < ends.size(); ++q) {
    writers[q].put(ids.subspan(begin, ends[q] - begin));
    begin = ends[q];
  }
  std::vector<Writer> answers(writers.size());
  {
    const auto questions = exchange(writers, comm);
    for (std::size_t q = 0; q < questions.size(); ++q) {
      const PackedArray<gid_t> asked = Reader(questions[q]).next<gid_t>();
      answers[q].reserve(Writer::bytes_of_array<T>(asked.size()));
      answers[q].start_array<T>(asked.size());
      for (std::size_t i = 0; i < asked.size(); ++i) answers[q].add(T(value_of(asked[i])));
    }
  }
  // The answers in rank order are in the order of the ids; the array for them is made once the answers out are gone.
  const auto messages = exchange(answers, comm);
  std::vector<T> values(ids.size());
  std::size_t at = 0;
  for (const auto& message : messages) {
    const PackedArray<T> some = Reader(message).next<T>();
    NJ_EXPECTS(at + some.size() <= values.size(), "{} answers past the {} ids asked", at + some.size(), values.size());
    some.copy_to(0, some.size(), values.data() + at);
    at += some.size();
  }
  return values;
}

}  // namespace nj
