#include "nj/io/hdf5.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <numeric>
#include <type_traits>

#include "nj/core/error.hpp"
#include "nj/io/input_limits.hpp"

namespace nj::hdf5 {
namespace {

// HDF5 prints its own error stack by default; the project reports errors itself, once.
void silence_library_errors() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

template <typename T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  if constexpr (std::is_same_v<T, std::uint8_t>) return H5T_NATIVE_UINT8;
}

// The number of elements of a shape read from a file, saturated at the int64 maximum: the product of a corrupt
// shape's dimensions may overflow.
std::int64_t element_count(const std::vector<hsize_t>& shape) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (std::find(shape.begin(), shape.end(), hsize_t{0}) != shape.end()) return 0;
  std::int64_t count = 1;
  for (const hsize_t d : shape) {
    if (d > static_cast<hsize_t>(kMax / count)) return kMax;
    count *= static_cast<std::int64_t>(d);
  }
  return count;
}

const char* class_name(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum";
    default: return "non-numeric";
  }
}

// The class a value of type `type` reads as: an enum over integers is read as its integer values, as h5py stores
// NumPy's bool (FALSE = 0, TRUE = 1 over int8), which HDF5 converts to any integer type.
H5T_class_t numeric_class(hid_t type) {
  const H5T_class_t type_class = H5Tget_class(type);
  if (type_class != H5T_ENUM) return type_class;
  const Handle base(H5Tget_super(type), H5Tclose);
  return base.get() >= 0 && H5Tget_class(base.get()) == H5T_INTEGER ? H5T_INTEGER : H5T_ENUM;
}

// The widest number of the project's formats. HDF5 reads a dataset through a conversion buffer of the stored
// width, which a corrupt type can state as gigabytes.
constexpr std::size_t kMaxNumberBytes = 8;

}  // namespace

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && close_ != nullptr) close_(id_);
}

void File::fail(const std::string& object, const std::string& what) const {
  throw InputError(object.empty() ? fmt::format("{}: {}", path_, what)
                                  : fmt::format("{}: {}: {}", path_, object, what));
}

File File::create(const std::string& path) {
  silence_library_errors();
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw InputError(fmt::format("{}: cannot create HDF5 file", path));
  return {path, Handle(id, H5Fclose)};
}

File File::open_read(const std::string& path) {
  silence_library_errors();
  NJ_REQUIRE(std::filesystem::exists(path), "{}: no such file", path);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw InputError(fmt::format("{}: not a readable HDF5 file (truncated or corrupt?)", path));
  return {path, Handle(id, H5Fclose)};
}

File File::open_write(const std::string& path) {
  silence_library_errors();
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (id < 0) throw InputError(fmt::format("{}: cannot open HDF5 file for writing", path));
  return {path, Handle(id, H5Fclose)};
}

bool File::exists(const std::string& object) const {
  // H5Lexists needs each parent to exist, so walk the path one component at a time.
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = object.find('/', pos + 1);
    const std::string prefix = object.substr(0, pos);
    if (prefix.empty() || prefix == "/") continue;
    if (H5Lexists(handle_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

void File::create_group(const std::string& group) {
  const Handle g(H5Gcreate2(handle_.get(), group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (g.get() < 0) fail(group, "cannot create group");
}

std::vector<std::string> File::members(const std::string& group) const {
  if (!exists(group)) fail(group, "missing");
  const Handle g(H5Gopen2(handle_.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
  if (g.get() < 0) fail(group, "not a group");
  H5G_info_t info{};
  if (H5Gget_info(g.get(), &info) < 0) fail(group, "unreadable group");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t length = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (length < 0) fail(group, "unreadable member name");
    std::string name(static_cast<std::size_t>(length) + 1, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<std::size_t>(length));
    names.push_back(std::move(name));
  }
  return names;
}

std::vector<hsize_t> File::shape(const std::string& dataset) const {
  if (!exists(dataset)) fail(dataset, "missing");
  const Handle ds(H5Dopen2(handle_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds.get() < 0) fail(dataset, "not a dataset");
  const Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail(dataset, "unreadable dataspace");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

template <typename T>
void File::create(const std::string& dataset, const std::vector<hsize_t>& shape, hsize_t rows_per_chunk) {
  const Handle space(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), H5Sclose);
  const Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (rows_per_chunk > 0 && !shape.empty() && shape[0] > 0) {
    std::vector<hsize_t> chunk = shape;
    chunk[0] = std::min(rows_per_chunk, shape[0]);
    H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data());
  }
  const Handle ds(
      H5Dcreate2(handle_.get(), dataset.c_str(), native_type<T>(), space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT),
      H5Dclose);
  if (ds.get() < 0) fail(dataset, "cannot create dataset");
}

template <typename T>
void File::write_rows(const std::string& dataset, std::int64_t first, std::span<const T> values) {
  std::vector<hsize_t> count = shape(dataset);
  if (count.empty()) fail(dataset, "a scalar has no rows to write");
  const hsize_t rows = count.front();
  const hsize_t row = std::accumulate(count.begin() + 1, count.end(), hsize_t{1}, std::multiplies<>());
  NJ_EXPECTS(
      row > 0 && values.size() % row == 0 && first >= 0 && static_cast<hsize_t>(first) + values.size() / row <= rows,
      "{}: {} values from row {} of {} rows of {}", dataset, values.size(), first, rows, row);
  if (values.empty()) return;
  std::vector<hsize_t> start(count.size(), 0);
  start.front() = static_cast<hsize_t>(first);
  count.front() = values.size() / row;
  const Handle ds(H5Dopen2(handle_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  const Handle file_space(H5Dget_space(ds.get()), H5Sclose);
  const Handle memory_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
      H5Dwrite(ds.get(), native_type<T>(), memory_space.get(), file_space.get(), H5P_DEFAULT, values.data()) < 0) {
    fail(dataset, "write failed");
  }
}

template <typename T>
void File::write(const std::string& dataset, std::span<const T> values, const std::vector<hsize_t>& shape,
                 hsize_t rows_per_chunk) {
  const hsize_t total = std::accumulate(shape.begin(), shape.end(), hsize_t{1}, std::multiplies<>());
  NJ_EXPECTS(total == values.size(), "{}: {} values for shape of {}", dataset, values.size(), total);
  create<T>(dataset, shape, rows_per_chunk);
  if (total > 0) write_rows<T>(dataset, 0, values);
}

template <typename T>
std::vector<hsize_t> File::check_readable(const std::string& dataset, std::int64_t rows) const {
  std::vector<hsize_t> dims = shape(dataset);
  const Handle ds(H5Dopen2(handle_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  const Handle type(H5Dget_type(ds.get()), H5Tclose);
  const H5T_class_t stored = numeric_class(type.get());
  const H5T_class_t wanted = std::is_floating_point_v<T> ? H5T_FLOAT : H5T_INTEGER;
  if (stored != wanted) {
    fail(dataset, fmt::format("expected {} data, found {}", class_name(wanted), class_name(stored)));
  }
  if (H5Tget_size(type.get()) > kMaxNumberBytes) {
    fail(dataset, fmt::format("stored as {}-byte numbers (at most {} in this format)", H5Tget_size(type.get()),
                              kMaxNumberBytes));
  }
  std::vector<hsize_t> read = dims;
  if (rows >= 0 && !read.empty()) read[0] = std::min(read[0], static_cast<hsize_t>(rows));
  require_input_memory(element_count(read), sizeof(T), fmt::format("{}: {}", path_, dataset),
                       fmt::format("{} values", fmt::join(read, " x ")));
  return dims;
}

template <typename T>
Array<T> File::read(const std::string& dataset) const {
  Array<T> out;
  out.shape = check_readable<T>(dataset);
  const Handle ds(H5Dopen2(handle_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  const std::int64_t total = element_count(out.shape);
  out.values.resize(static_cast<std::size_t>(total));
  if (total > 0 && H5Dread(ds.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.values.data()) < 0) {
    fail(dataset, "read failed (truncated or corrupt file?)");
  }
  return out;
}

template <typename T>
Array<T> File::read_rows(const std::string& dataset, std::int64_t first, std::int64_t count) const {
  std::vector<hsize_t> dims = check_readable<T>(dataset, count);
  if (dims.empty() || first < 0 || count < 0 || static_cast<hsize_t>(first + count) > dims[0]) {
    fail(dataset, fmt::format("rows {} to {} asked of {}", first, first + count, dims.empty() ? 0 : dims[0]));
  }
  Array<T> out;
  out.shape = dims;
  out.shape[0] = static_cast<hsize_t>(count);
  out.values.resize(static_cast<std::size_t>(element_count(out.shape)));
  if (out.values.empty()) return out;
  const Handle ds(H5Dopen2(handle_.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  const Handle file_space(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0);
  start[0] = static_cast<hsize_t>(first);
  const Handle memory_space(H5Screate_simple(static_cast<int>(out.shape.size()), out.shape.data(), nullptr), H5Sclose);
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, out.shape.data(), nullptr) < 0 ||
      H5Dread(ds.get(), native_type<T>(), memory_space.get(), file_space.get(), H5P_DEFAULT, out.values.data()) < 0) {
    fail(dataset, fmt::format("read of rows {} to {} failed (truncated or corrupt file?)", first, first + count));
  }
  return out;
}

template void File::create<float>(const std::string&, const std::vector<hsize_t>&, hsize_t);
template void File::write_rows<float>(const std::string&, std::int64_t, std::span<const float>);
template void File::write<float>(const std::string&, std::span<const float>, const std::vector<hsize_t>&, hsize_t);
template void File::create<double>(const std::string&, const std::vector<hsize_t>&, hsize_t);
template void File::write_rows<double>(const std::string&, std::int64_t, std::span<const double>);
template void File::write<double>(const std::string&, std::span<const double>, const std::vector<hsize_t>&, hsize_t);
template void File::create<std::int32_t>(const std::string&, const std::vector<hsize_t>&, hsize_t);
template void File::write_rows<std::int32_t>(const std::string&, std::int64_t, std::span<const std::int32_t>);
template void File::write<std::int32_t>(const std::string&, std::span<const std::int32_t>, const std::vector<hsize_t>&,
                                        hsize_t);
template void File::create<std::int64_t>(const std::string&, const std::vector<hsize_t>&, hsize_t);
template void File::write_rows<std::int64_t>(const std::string&, std::int64_t, std::span<const std::int64_t>);
template void File::write<std::int64_t>(const std::string&, std::span<const std::int64_t>, const std::vector<hsize_t>&,
                                        hsize_t);
template void File::create<std::uint8_t>(const std::string&, const std::vector<hsize_t>&, hsize_t);
template void File::write_rows<std::uint8_t>(const std::string&, std::int64_t, std::span<const std::uint8_t>);
template void File::write<std::uint8_t>(const std::string&, std::span<const std::uint8_t>, const std::vector<hsize_t>&,
                                        hsize_t);
template std::vector<hsize_t> File::check_readable<float>(const std::string&, std::int64_t) const;
template Array<float> File::read<float>(const std::string&) const;
template Array<double> File::read<double>(const std::string&) const;
template Array<std::int32_t> File::read<std::int32_t>(const std::string&) const;
template Array<std::int64_t> File::read<std::int64_t>(const std::string&) const;
template Array<std::uint8_t> File::read<std::uint8_t>(const std::string&) const;
template Array<float> File::read_rows<float>(const std::string&, std::int64_t, std::int64_t) const;
template Array<std::int32_t> File::read_rows<std::int32_t>(const std::string&, std::int64_t, std::int64_t) const;
template Array<std::int64_t> File::read_rows<std::int64_t>(const std::string&, std::int64_t, std::int64_t) const;
template Array<std::uint8_t> File::read_rows<std::uint8_t>(const std::string&, std::int64_t, std::int64_t) const;

namespace {

template <typename T>
void write_scalar_attribute(hid_t file, const std::string& key, hid_t type, const T& value, const std::string& path) {
  H5Adelete(file, key.c_str());  // replace if present; failure just means absent
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Handle attr(H5Acreate2(file, key.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (attr.get() < 0 || H5Awrite(attr.get(), type, &value) < 0) {
    throw InputError(fmt::format("{}: cannot write attribute '{}'", path, key));
  }
}

}  // namespace

void File::set_attribute(const std::string& key, const std::string& value) {
  const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const char* text = value.c_str();
  write_scalar_attribute(handle_.get(), key, type.get(), text, path_);
}

void File::set_attribute(const std::string& key, std::int64_t value) {
  write_scalar_attribute(handle_.get(), key, H5T_NATIVE_INT64, value, path_);
}

void File::set_attribute(const std::string& key, double value) {
  write_scalar_attribute(handle_.get(), key, H5T_NATIVE_DOUBLE, value, path_);
}

bool File::has_attribute(const std::string& key) const { return H5Aexists(handle_.get(), key.c_str()) > 0; }

namespace {

Handle open_attribute(hid_t file, const std::string& key, const std::string& path) {
  if (H5Aexists(file, key.c_str()) <= 0) throw InputError(fmt::format("{}: attribute '{}' is missing", path, key));
  Handle attr(H5Aopen(file, key.c_str(), H5P_DEFAULT), H5Aclose);
  if (attr.get() < 0) throw InputError(fmt::format("{}: attribute '{}' is unreadable", path, key));
  return attr;
}

template <typename T>
T read_numeric_attribute(hid_t file, const std::string& key, const std::string& path, H5T_class_t wanted, hid_t type) {
  const Handle attr = open_attribute(file, key, path);
  const Handle stored(H5Aget_type(attr.get()), H5Tclose);
  const H5T_class_t stored_class = numeric_class(stored.get());
  const bool numeric = stored_class == H5T_INTEGER || stored_class == H5T_FLOAT;
  if (!numeric || (wanted == H5T_INTEGER && stored_class != H5T_INTEGER)) {
    throw InputError(fmt::format("{}: attribute '{}' must be {}, found {}", path, key, class_name(wanted),
                                 class_name(stored_class)));
  }
  T value{};
  if (H5Aread(attr.get(), type, &value) < 0) {
    throw InputError(fmt::format("{}: attribute '{}' is unreadable", path, key));
  }
  return value;
}

}  // namespace

std::string File::string_attribute(const std::string& key) const {
  const Handle attr = open_attribute(handle_.get(), key, path_);
  const Handle stored(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(stored.get()) != H5T_STRING) fail("", fmt::format("attribute '{}' must be a string", key));
  // Read with the stored character set: HDF5 does not convert between ASCII and UTF-8 (h5py writes UTF-8).
  if (H5Tis_variable_str(stored.get()) > 0) {
    const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), H5T_VARIABLE);
    H5Tset_cset(type.get(), H5Tget_cset(stored.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), type.get(), &text) < 0) fail("", fmt::format("attribute '{}' is unreadable", key));
    std::string value = text == nullptr ? "" : text;
    H5free_memory(text);
    return value;
  }
  // Read with the stored type itself: converting NULLPAD (h5py's fixed-length strings) to NULLTERM of the same
  // size would drop the last character.
  const std::size_t size = H5Tget_size(stored.get());
  std::string value(size, '\0');
  if (H5Aread(attr.get(), stored.get(), value.data()) < 0) fail("", fmt::format("attribute '{}' is unreadable", key));
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

std::int64_t File::int_attribute(const std::string& key) const {
  return read_numeric_attribute<std::int64_t>(handle_.get(), key, path_, H5T_INTEGER, H5T_NATIVE_INT64);
}

double File::float_attribute(const std::string& key) const {
  return read_numeric_attribute<double>(handle_.get(), key, path_, H5T_FLOAT, H5T_NATIVE_DOUBLE);
}

}  // namespace nj::hdf5
