// Structured edits of a valid HDF5 file, the way the HDF5 fuzz targets reach past the library's own checks to
// the readers' checks. An input is a list of edits; each is an opcode byte, a byte that picks the object (the
// file's datasets and groups, then its root attributes, each sorted by name) and the opcode's operands:
//   dataset    0 delete; 1 replace by a new dataset of a chosen type, shape and raw values; 2 set one element;
//              3 change the first dimension, repeating the values (or, for a length byte of 255, to the next 8
//              bytes, leaving the values unwritten);
//   group      any opcode deletes it;
//   attribute  0 delete; 1 set to an integer; 2 to a float; 3 to a variable-length string; 4 to a fixed-length
//              string.
// An edit that cannot apply (its object deleted before) is skipped.
#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "nj/io/hdf5.hpp"
#include "target_support.hpp"

namespace nj::fuzz {
namespace {

using hdf5::Handle;

struct Target {
  std::string name;
  bool attribute = false;
};

herr_t collect_link(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

herr_t collect_attribute(hid_t /*object*/, const char* name, const H5A_info_t* /*info*/, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

std::vector<Target> targets_of(hid_t file) {
  std::vector<std::string> links;
  std::vector<std::string> attributes;
  H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_link, &links);
  H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute, &attributes);
  std::vector<Target> targets;
  for (auto& name : links) targets.push_back({"/" + name, false});
  for (auto& name : attributes) targets.push_back({std::move(name), true});
  return targets;
}

// The element types a replacing dataset may have.
Handle element_type(std::uint8_t choice) {
  switch (choice % 7) {
    case 0: return {H5Tcopy(H5T_NATIVE_UINT8), H5Tclose};
    case 1: return {H5Tcopy(H5T_NATIVE_INT8), H5Tclose};
    case 2: return {H5Tcopy(H5T_NATIVE_INT32), H5Tclose};
    case 3: return {H5Tcopy(H5T_NATIVE_INT64), H5Tclose};
    case 4: return {H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose};
    case 5: return {H5Tcopy(H5T_NATIVE_DOUBLE), H5Tclose};
    default: {
      Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(type.get(), 4);
      return type;
    }
  }
}

void create_dataset(hid_t file, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                    const std::vector<std::uint8_t>& values) {
  const Handle space(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      H5Sclose);
  const Handle dataset(H5Dcreate2(file, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                       H5Dclose);
  if (dataset.get() >= 0 && !values.empty())
    H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

std::vector<hsize_t> dims_of(hid_t dataset) {
  const Handle space(H5Dget_space(dataset), H5Sclose);
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(H5Sget_simple_extent_ndims(space.get()), 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// Datasets with more elements than this (an earlier edit's huge length) are not read back: their values were
// never written, and reading them would take the memory the readers are checked for not taking.
constexpr hsize_t kMaxElementsReadBack = hsize_t{1} << 20U;

// The element count of a shape, saturated: an earlier edit may have made it huge.
hsize_t count_of(const std::vector<hsize_t>& dims) {
  hsize_t count = 1;
  for (const hsize_t d : dims) count = d != 0 && count > ~hsize_t{0} / d ? ~hsize_t{0} : count * d;
  return count;
}

void replace_dataset(hid_t file, const std::string& name, ByteSource& input) {
  const Handle type = element_type(input.byte());
  const unsigned rank = input.byte() % 4U;
  std::vector<hsize_t> dims;
  // The first dimension up to 255, the others up to 31: shapes a reader checks, not memory to fill.
  for (unsigned d = 0; d < rank; ++d) dims.push_back(d == 0 ? input.byte() : input.byte() % 32U);
  std::vector<std::uint8_t> values(count_of(dims) * H5Tget_size(type.get()));
  const Bytes given = input.take(values.size());
  std::copy(given.begin(), given.end(), values.begin());
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  create_dataset(file, name, type.get(), dims, values);
}

void set_element(hid_t file, const std::string& name, ByteSource& input) {
  const hsize_t low = input.byte();
  const hsize_t index = low | (hsize_t{input.byte()} << 8U);
  const std::uint64_t bits = input.u64();
  const Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (dataset.get() < 0) return;
  const Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const hsize_t count = count_of(dims_of(dataset.get()));
  if (count == 0 || count > kMaxElementsReadBack) return;
  // Integers are changed as int64 and floats as double; HDF5 converts (and clips) to the stored type.
  const H5T_class_t type_class = H5Tget_class(type.get());
  if (type_class != H5T_INTEGER && type_class != H5T_FLOAT) return;
  const hid_t wide = type_class == H5T_INTEGER ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
  std::vector<std::uint64_t> values(count);
  if (H5Dread(dataset.get(), wide, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) return;
  values[index % count] = bits;
  H5Dwrite(dataset.get(), wide, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

void change_length(hid_t file, const std::string& name, ByteSource& input) {
  // A length byte of 255 takes the next 8 bytes as the length: a shape beyond any file, whose values are not
  // written (HDF5 stores none until they are), for the readers' checks of a shape before they allocate for it.
  const std::uint8_t length_byte = input.byte();
  const bool huge = length_byte == 255;
  const hsize_t length = huge ? input.u64() : length_byte;
  std::vector<hsize_t> dims;
  std::vector<std::uint8_t> old_values;
  Handle type;
  {
    const Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    if (dataset.get() < 0) return;
    type = Handle(H5Dget_type(dataset.get()), H5Tclose);
    if (H5Tis_variable_str(type.get()) != 0) return;
    dims = dims_of(dataset.get());
    if (dims.empty()) return;
    if (count_of(dims) <= kMaxElementsReadBack) {
      old_values.resize(count_of(dims) * H5Tget_size(type.get()));
      if (H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, old_values.data()) < 0) return;
    }
  }
  dims[0] = length;
  std::vector<std::uint8_t> values(huge ? 0 : count_of(dims) * H5Tget_size(type.get()));
  for (std::size_t i = 0; i < values.size() && !old_values.empty(); ++i) values[i] = old_values[i % old_values.size()];
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  create_dataset(file, name, type.get(), dims, values);
}

void set_attribute(hid_t file, const std::string& key, hid_t type, const void* value) {
  H5Adelete(file, key.c_str());
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Handle attribute(H5Acreate2(file, key.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (attribute.get() >= 0) H5Awrite(attribute.get(), type, value);
}

void edit_attribute(hid_t file, const std::string& key, std::uint8_t opcode, ByteSource& input) {
  switch (opcode % 5) {
    case 0: H5Adelete(file, key.c_str()); return;
    case 1: {
      const auto value = static_cast<std::int64_t>(input.u64());
      set_attribute(file, key, H5T_NATIVE_INT64, &value);
      return;
    }
    case 2: {
      const auto value = std::bit_cast<double>(input.u64());
      set_attribute(file, key, H5T_NATIVE_DOUBLE, &value);
      return;
    }
    default: {
      const Bytes bytes = input.take(input.byte());
      const std::string text(bytes.begin(), bytes.end());
      const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
      if (opcode % 5 == 3) {
        H5Tset_size(type.get(), H5T_VARIABLE);
        H5Tset_cset(type.get(), H5T_CSET_UTF8);
        const char* pointer = text.c_str();
        set_attribute(file, key, type.get(), static_cast<const void*>(&pointer));
      } else {
        H5Tset_size(type.get(), std::max<std::size_t>(text.size(), 1));
        H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
        set_attribute(file, key, type.get(), text.c_str());
      }
    }
  }
}

bool is_group(hid_t file, const std::string& name) {
  const Handle object(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
  return object.get() >= 0 && H5Iget_type(object.get()) == H5I_GROUP;
}

}  // namespace

void edit_hdf5_file(const std::string& path, Bytes edits) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // edits that cannot apply fail quietly
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (file.get() < 0) return;
  const std::vector<Target> targets = targets_of(file.get());
  ByteSource input(edits);
  while (!input.empty() && !targets.empty()) {
    const std::uint8_t opcode = input.byte();
    const Target& target = targets[input.byte() % targets.size()];
    if (target.attribute) {
      edit_attribute(file.get(), target.name, opcode, input);
    } else if (is_group(file.get(), target.name) || opcode % 4 == 0) {
      H5Ldelete(file.get(), target.name.c_str(), H5P_DEFAULT);
    } else if (opcode % 4 == 1) {
      replace_dataset(file.get(), target.name, input);
    } else if (opcode % 4 == 2) {
      set_element(file.get(), target.name, input);
    } else {
      change_length(file.get(), target.name, input);
    }
  }
}

}  // namespace nj::fuzz
