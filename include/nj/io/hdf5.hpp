#pragma once
// A thin RAII layer over the HDF5 C API: typed whole-dataset reads and writes, attributes, and errors that
// name the file and the object inside it.
#include <hdf5.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/core/error.hpp"

namespace nj::hdf5 {

// Owns one HDF5 identifier and closes it with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  ~Handle();
  hid_t get() const { return id_; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

template <typename T>
struct Array {
  std::vector<T> values;
  std::vector<hsize_t> shape;
};

class File {
 public:
  static File create(const std::string& path);     // truncates
  static File open_read(const std::string& path);  // fails with a clear error if missing or not HDF5
  static File open_write(const std::string& path);

  const std::string& path() const { return path_; }
  bool exists(const std::string& object) const;
  void create_group(const std::string& group);
  // The names of a group's members, in name order.
  std::vector<std::string> members(const std::string& group) const;
  std::vector<hsize_t> shape(const std::string& dataset) const;

  // Creates a dataset of the given shape, its values written later by write_rows; rows_per_chunk > 0 stores it chunked
  // along the first axis. What a writer of more rows than it holds at once starts with.
  template <typename T>
  void create(const std::string& dataset, const std::vector<hsize_t>& shape, hsize_t rows_per_chunk = 0);
  // Writes whole rows from row `first` on (an HDF5 hyperslab) into a created dataset.
  template <typename T>
  void write_rows(const std::string& dataset, std::int64_t first, std::span<const T> values);
  // Writes a dataset of the given shape; rows_per_chunk > 0 stores it chunked along the first axis.
  template <typename T>
  void write(const std::string& dataset, std::span<const T> values, const std::vector<hsize_t>& shape,
             hsize_t rows_per_chunk = 0);
  // Reads a whole dataset, converting integer widths; a float dataset must be read as float and an integer
  // one as an integer type.
  template <typename T>
  Array<T> read(const std::string& dataset) const;
  // Reads rows [first, first + count) along the first axis (an HDF5 hyperslab), with every other axis whole: what a
  // rank of several reads of a file too large for one process. Fails, naming the object, past the last row.
  template <typename T>
  Array<T> read_rows(const std::string& dataset, std::int64_t first, std::int64_t count) const;
  // What read<T> checks before it reads (the type, and the memory its values would take: of `rows` rows where that is
  // not negative, else of them all), without reading; returns the shape.
  template <typename T>
  std::vector<hsize_t> check_readable(const std::string& dataset, std::int64_t rows = -1) const;

  void set_attribute(const std::string& key, const std::string& value);
  void set_attribute(const std::string& key, std::int64_t value);
  void set_attribute(const std::string& key, double value);
  bool has_attribute(const std::string& key) const;
  std::string string_attribute(const std::string& key) const;
  std::int64_t int_attribute(const std::string& key) const;
  double float_attribute(const std::string& key) const;

 private:
  File(std::string path, Handle handle) : path_(std::move(path)), handle_(std::move(handle)) {}
  [[noreturn]] void fail(const std::string& object, const std::string& what) const;

  std::string path_;
  Handle handle_;
};

// Reads a one-dimensional dataset of `expected_length` entries (any length when negative); errors name the file
// and the object.
template <typename T>
std::vector<T> read_vector(const File& file, const std::string& dataset, std::int64_t expected_length) {
  auto array = file.read<T>(dataset);
  NJ_REQUIRE(array.shape.size() == 1, "{}: {}: expected 1 dimension, found {}", file.path(), dataset,
             array.shape.size());
  if (expected_length >= 0) {
    NJ_REQUIRE(static_cast<std::int64_t>(array.shape[0]) == expected_length, "{}: {}: expected {} entries, found {}",
               file.path(), dataset, expected_length, array.shape[0]);
  }
  return std::move(array.values);
}

}  // namespace nj::hdf5
