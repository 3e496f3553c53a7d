// The main() of a fuzz target built without libFuzzer: runs it once on every file named, or found under a folder
// named, in name order; a name that does not exist is skipped (a reader without regressions has no folder). How
// the normal test suite replays the seed corpus and every input that once failed (tests/fuzz/regressions); it
// prints each input's outcome.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path named(argv[i]);
    if (fs::is_regular_file(named)) inputs.push_back(named);
    if (!fs::is_directory(named)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(named)) {
      if (entry.is_regular_file()) inputs.push_back(entry.path());
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    fmt::print(stderr, "replay: no inputs found\n");
    return 1;
  }
  nj::fuzz::print_outcomes(true);
  nj::fuzz::take_raw_hdf5(true);
  for (const fs::path& path : inputs) {
    fmt::print("replay: {}\n", path.string());
    std::fflush(stdout);  // a crash below is then seen to be this input's
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  fmt::print("replay: {} inputs, each read cleanly\n", inputs.size());
  return 0;
}
