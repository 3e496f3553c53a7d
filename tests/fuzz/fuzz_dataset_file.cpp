// Fuzz target of the HDF5 dataset reader, nj::read_dataset (nj info, partition, plan, train): raw HDF5 files,
// and edits of a valid dataset file (hdf5_edits.cpp).
#include "nj/io/dataset_file.hpp"
#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  const std::string path = hdf5_input({data, size}, base_dataset_file(), "dataset.h5");
  expect_clean_outcome(path, [&] { nj::read_dataset(path); });
  expect_no_open_hdf5_objects();
  return 0;
}
