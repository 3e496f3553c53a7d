#pragma once
// What ranks that each hold a slice of the vertices send one another: typed arrays packed into the byte messages of
// Communicator::all_to_all and read back in the order they were packed (each array is its length and then its values),
// and the slices themselves.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/error.hpp"
#include "nj/core/types.hpp"

namespace nj {

// Packs arrays into one message.
class Writer {
 public:
  template <typename T>
  void put(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto count = static_cast<std::int64_t>(values.size());
    append(&count, sizeof(count));
    append(values.data(), values.size_bytes());
  }
  template <typename T>
  void put(const std::vector<T>& values) {
    put(std::span<const T>(values));
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void append(const void* data, std::size_t size) {
    const auto* first = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), first, first + size);
  }
  std::vector<std::byte> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <typename T>
  std::vector<T> take() {
    std::int64_t count = 0;
    copy(&count, sizeof(count));
    NJ_EXPECTS(count >= 0 && static_cast<std::size_t>(count) * sizeof(T) <= bytes_.size() - at_,
               "a message holds {} bytes past {}, not {} values", bytes_.size() - at_, at_, count);
    std::vector<T> values(static_cast<std::size_t>(count));
    copy(values.data(), values.size() * sizeof(T));
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

// What the owners of `ids` (ascending, without repeats) say of them: `value_of(id)` on the rank whose slice holds
// each id, returned in the order of the ids. A collective of every rank.
template <typename T, typename ValueOf>
std::vector<T> ask_owners(std::span<const gid_t> ids, const Slices& slices, Communicator& comm, ValueOf value_of) {
  std::vector<std::vector<gid_t>> asked(static_cast<std::size_t>(slices.ranks()));
  for (const gid_t id : ids) asked[static_cast<std::size_t>(slices.owner(id))].push_back(id);
  std::vector<Writer> writers(asked.size());
  for (std::size_t q = 0; q < asked.size(); ++q) writers[q].put(asked[q]);
  asked = {};
  std::vector<Writer> answers(writers.size());
  const auto questions = exchange(writers, comm);
  for (std::size_t q = 0; q < questions.size(); ++q) {
    std::vector<T> answer;
    for (const gid_t id : Reader(questions[q]).take<gid_t>()) answer.push_back(value_of(id));
    answers[q].put(answer);
  }
  // The ids were ascending and the slices are, so the answers in rank order are in the order of the ids.
  std::vector<T> values;
  values.reserve(ids.size());
  for (const auto& message : exchange(answers, comm)) {
    const std::vector<T> some = Reader(message).take<T>();
    values.insert(values.end(), some.begin(), some.end());
  }
  return values;
}

}  // namespace nj
