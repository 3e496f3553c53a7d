// Fuzz target of the manifest of partition folders: the input is manifest.json in a folder that also holds the
// two valid shards it should name; read as `nj train --partitions` does (nj::load_part, part 0 of as many parts
// as the manifest says), which reads the manifest and then the shard it names.
#include <filesystem>

#include "nj/io/shard_file.hpp"
#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  const std::filesystem::path folder = scratch_dir() / "partition";
  if (!std::filesystem::exists(folder)) {
    std::filesystem::copy(base_partition_dir(), folder, std::filesystem::copy_options::recursive);
  }
  write_file(folder / nj::kManifestFileName, {data, size});
  expect_clean_outcome(folder.string(), [&] {
    const nj::PartitionManifest manifest = nj::read_manifest(folder.string());
    nj::load_part(folder.string(), 0, manifest.partition.parts);
  });
  expect_no_open_hdf5_objects();
  return 0;
}
