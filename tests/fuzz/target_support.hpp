#pragma once
// What the fuzz targets of the input readers share (docs/reliability.md, "Fuzzing"). A target turns one input
// into the files a reader takes, runs the reader and checks its outcome with expect_clean_outcome: success, or
// an nj::Error with a one-line message that names the input. Anything else aborts, which libFuzzer reports as a
// crash (and saves the input), and which fails the regression replay of the normal test suite.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace nj::fuzz {

using Bytes = std::span<const std::uint8_t>;

// This process's folder for the files the targets write (under TMPDIR), removed at exit. The first call also
// sets up the process for fuzzing: logging off, and a small input memory limit (set_input_memory_limit), so that
// a size field asking for more is an error rather than an allocation the fuzzer reports as out of memory.
const std::filesystem::path& scratch_dir();

void write_file(const std::filesystem::path& path, Bytes bytes);
// The bytes as a gzip stream.
std::vector<std::uint8_t> gzip(Bytes bytes);
// The pieces of `input` between `separator` bytes: one more than there are separators.
std::vector<Bytes> split(Bytes input, std::uint8_t separator);

// Runs `read` and returns when it succeeds or throws an nj::Error whose message is one line that contains
// `subject` (the input's file or folder). Otherwise prints what is wrong and aborts.
void expect_clean_outcome(const std::string& subject, const std::function<void()>& read);
// With `print` set, expect_clean_outcome also prints each outcome ("ok" or the error message) on stdout: what the
// replay of the corpus shows; the fuzzers stay quiet.
void print_outcomes(bool print);
// Aborts when an HDF5 file, dataset, attribute or type is still open: a reader that leaves one open on an
// error path keeps the file open for the rest of the process.
void expect_no_open_hdf5_objects();

// Reads an input front to back as bytes and little-endian values; past its end every read gives zeros.
class ByteSource {
 public:
  explicit ByteSource(Bytes bytes) : rest_(bytes) {}
  bool empty() const { return rest_.empty(); }
  std::uint8_t byte();
  std::uint64_t u64();
  // Up to `count` bytes.
  Bytes take(std::size_t count);

 private:
  Bytes rest_;
};

// Whether hdf5_input takes raw files: on in the replay, and under libFuzzer where NJ_FUZZ_RAW_HDF5=1. Mutated raw
// files soon crash Debian's libhdf5 1.10.8 in its own code (reading a corrupt global heap), which no reader can
// prevent; fuzzed without them, the HDF5 targets test the readers, with them also the library.
void take_raw_hdf5(bool take);

// Valid files for the targets to start from, written once into scratch_dir(): a small generated dataset (12
// vertices), and its contiguous partition into 2 parts (manifest.json, part-0.h5, part-1.h5).
const std::filesystem::path& base_dataset_file();
const std::filesystem::path& base_partition_dir();

// The HDF5 file of an input, written to `scratch_dir()/name`: an input that starts with the HDF5 signature is
// the file's bytes, where raw files are taken (take_raw_hdf5); any other is a list of edits (hdf5_edits.cpp) to a
// copy of `base`, a valid file, so that the fuzzer reaches the reader's own checks as well as the HDF5 library's.
// A raw file that libhdf5 1.10 would loop forever on (a corrupt global heap, see hangs_hdf5) is replaced by
// `base`. Returns the file's path.
std::string hdf5_input(Bytes input, const std::filesystem::path& base, const std::string& name);
// Applies the edits that `edits` encodes to the HDF5 file at `path`.
void edit_hdf5_file(const std::string& path, Bytes edits);

}  // namespace nj::fuzz
