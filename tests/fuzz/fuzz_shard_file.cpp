// Fuzz target of the shard reader of partition folders, nj::read_shard (nj info, plan, train --partitions): raw
// HDF5 files, and edits of a valid shard, part 1 of 2 (hdf5_edits.cpp).
#include "nj/io/shard_file.hpp"
#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  const std::string path = hdf5_input({data, size}, base_partition_dir() / nj::shard_file_name(1), "shard.h5");
  expect_clean_outcome(path, [&] { nj::read_shard(path); });
  expect_no_open_hdf5_objects();
  return 0;
}
