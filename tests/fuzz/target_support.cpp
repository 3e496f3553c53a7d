#include "target_support.hpp"

#include <cxxabi.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <typeinfo>

#include "nj/core/error.hpp"
#include "nj/graph/generate.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/input_limits.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/partition.hpp"

namespace nj::fuzz {
namespace {

namespace fs = std::filesystem;

// Enough for every valid input the targets build, small enough that the sanitizers' copy of it stays far
// below libFuzzer's -rss_limit_mb.
constexpr std::int64_t kFuzzInputMemoryLimit = std::int64_t{16} << 20U;

constexpr std::string_view kHdf5Signature = "\x89HDF\r\n\x1a\n";

bool printing_outcomes = false;
bool taking_raw_hdf5 = false;

[[noreturn]] void fail(std::string_view problem, std::string_view message) {
  fmt::print(stderr, "fuzz: {}:\n{}\n", problem, message);
  std::fflush(stderr);
  std::abort();
}

std::string type_name(const std::type_info& type) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
  return status == 0 ? demangled.get() : type.name();
}

// Removes the scratch folder when the process ends normally (a crash leaves it under TMPDIR for a look).
class ScratchDir {
 public:
  ScratchDir() : path_(fs::temp_directory_path() / fmt::format("nj-fuzz-{}", getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    spdlog::set_level(spdlog::level::off);
    set_input_memory_limit(kFuzzInputMemoryLimit);
    const char* raw = std::getenv("NJ_FUZZ_RAW_HDF5");
    if (raw != nullptr && std::string_view(raw) == "1") taking_raw_hdf5 = true;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

Dataset small_dataset() {
  GeneratorOptions options;
  options.name = "fuzz";
  options.vertices = 12;
  options.edges = 40;
  options.features = 3;
  options.classes = 3;
  options.train_fraction = 0.5;
  return generate_dataset(options);
}

std::uint64_t little_endian(Bytes bytes, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= std::uint64_t{bytes[at + i]} << (8U * i);
  return value;
}

// Whether libhdf5 1.10 would loop forever on the file: it parses a global heap collection (where variable-length
// strings live, such as the name attribute) by stepping over each object's stated size, and a free-space object
// (index 0) that states a size of 0 is stepped over in place (H5HG__cache_heap_deserialize). Fixed in later HDF5
// releases; nothing the readers do avoids it, so the HDF5 targets do not run such files. The layout walked: "GCOL",
// version and 3 reserved bytes, the collection's 8-byte size; then objects of a 2-byte index, 2-byte reference
// count, 4 reserved bytes, 8-byte size and the data, padded to 8 bytes except in the free-space object.
bool hangs_hdf5(Bytes file) {
  constexpr std::size_t kCollectionHeader = 16;
  constexpr std::size_t kObjectHeader = 16;
  for (std::size_t at = 0; at + kCollectionHeader <= file.size(); ++at) {
    if (std::memcmp(file.data() + at, "GCOL", 4) != 0) continue;
    const std::uint64_t size = little_endian(file, at + 8, 8);
    const std::size_t end = at + static_cast<std::size_t>(std::min<std::uint64_t>(size, file.size() - at));
    for (std::size_t object = at + kCollectionHeader; object + kObjectHeader <= end;) {
      const std::uint64_t index = little_endian(file, object, 2);
      const std::uint64_t object_size = little_endian(file, object + 8, 8);
      const std::uint64_t step = index > 0 ? kObjectHeader + ((object_size + 7) & ~std::uint64_t{7}) : object_size;
      if (step == 0) return true;
      if (step > end - object) break;
      object += static_cast<std::size_t>(step);
    }
  }
  return false;
}

}  // namespace

const fs::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

void write_file(const fs::path& path, Bytes bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) fail("cannot write a fuzz input", path.string());
}

std::vector<std::uint8_t> gzip(Bytes bytes) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    fail("zlib", "deflateInit2 failed");
  }
  std::vector<std::uint8_t> out(deflateBound(&stream, static_cast<uLong>(bytes.size())));
  stream.next_in = const_cast<Bytef*>(bytes.data());
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) fail("zlib", "deflate did not finish");
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::vector<Bytes> split(Bytes input, std::uint8_t separator) {
  std::vector<Bytes> pieces;
  auto begin = input.begin();
  for (auto it = input.begin(); it != input.end(); ++it) {
    if (*it != separator) continue;
    pieces.emplace_back(begin, it);
    begin = it + 1;
  }
  pieces.emplace_back(begin, input.end());
  return pieces;
}

void print_outcomes(bool print) { printing_outcomes = print; }

void take_raw_hdf5(bool take) { taking_raw_hdf5 = take; }

void expect_clean_outcome(const std::string& subject, const std::function<void()>& read) {
  try {
    read();
    if (printing_outcomes) fmt::print("  ok\n");
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (printing_outcomes) fmt::print("  {}\n", message);
    if (message.find_first_of("\r\n") != std::string_view::npos) fail("an error message of several lines", message);
    if (message.find(subject) == std::string_view::npos) {
      fail(fmt::format("an error message that does not name {}", subject), message);
    }
  } catch (const std::exception& e) {
    fail(fmt::format("an exception that is not an nj::Error ({})", type_name(typeid(e))), e.what());
  }
}

void expect_no_open_hdf5_objects() {
  const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open != 0) fail("HDF5 objects left open", fmt::format("{} open after the reader returned", open));
}

std::uint8_t ByteSource::byte() {
  if (rest_.empty()) return 0;
  const std::uint8_t value = rest_.front();
  rest_ = rest_.subspan(1);
  return value;
}

std::uint64_t ByteSource::u64() {
  std::uint64_t value = 0;
  for (unsigned i = 0; i < 8; ++i) value |= std::uint64_t{byte()} << (8U * i);
  return value;
}

Bytes ByteSource::take(std::size_t count) {
  const Bytes taken = rest_.first(std::min(count, rest_.size()));
  rest_ = rest_.subspan(taken.size());
  return taken;
}

const fs::path& base_dataset_file() {
  static const fs::path path = [] {
    const fs::path file = scratch_dir() / "base-dataset.h5";
    // With a stored community order, so that edits reach its reader too.
    Dataset dataset = small_dataset();
    store_community_order(dataset);
    write_dataset(file.string(), dataset);
    return file;
  }();
  return path;
}

const fs::path& base_partition_dir() {
  static const fs::path path = [] {
    const fs::path folder = scratch_dir() / "base-partition";
    const Dataset dataset = small_dataset();
    PartitionOptions options;
    options.method = PartitionMethod::kContiguous;
    options.parts = 2;
    PartitionInfo info;
    const std::vector<std::int32_t> part_of = assign_parts(dataset, options, info);
    write_partition(dataset, "", part_of, info, folder.string());
    return folder;
  }();
  return path;
}

std::string hdf5_input(Bytes input, const fs::path& base, const std::string& name) {
  const fs::path path = scratch_dir() / name;
  const bool raw = taking_raw_hdf5 && input.size() >= kHdf5Signature.size() &&
                   std::memcmp(input.data(), kHdf5Signature.data(), kHdf5Signature.size()) == 0;
  if (raw && !hangs_hdf5(input)) {
    write_file(path, input);
  } else if (raw) {
    fs::copy_file(base, path, fs::copy_options::overwrite_existing);
  } else {
    fs::copy_file(base, path, fs::copy_options::overwrite_existing);
    edit_hdf5_file(path.string(), input);
  }
  return path.string();
}

}  // namespace nj::fuzz
