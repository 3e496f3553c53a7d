#pragma once
// Typed arrays packed into the byte messages of Communicator::all_to_all, and read back in the order they were packed:
// each array is its length and then its values.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "nj/core/error.hpp"

namespace nj::partition_messages {

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

}  // namespace nj::partition_messages
