// Fuzz target of the plain-folder reader, `nj convert --format plain`: nj::read_plain_folder, then the dataset
// checked as convert checks it. The first byte of an input says which of the folder's files exist (bit i for
// kFiles[i]); the rest, split at 0xff bytes, are their contents in that order (missing pieces are empty files).
#include <array>
#include <filesystem>

#include "nj/io/plain_text.hpp"
#include "target_support.hpp"

namespace {
constexpr std::array kFiles = {"meta.txt",  "edges.txt", "features.txt", "labels.txt",
                               "train.txt", "val.txt",   "test.txt"};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  ByteSource input({data, size});
  const std::uint8_t present = input.byte();
  const std::vector<Bytes> pieces = split(input.take(size), 0xff);
  const std::filesystem::path folder = scratch_dir() / "plain";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  std::size_t next = 0;
  for (std::size_t i = 0; i < kFiles.size(); ++i) {
    if ((present & (1U << i)) == 0) continue;
    write_file(folder / kFiles[i], next < pieces.size() ? pieces[next] : Bytes{});
    ++next;
  }
  expect_clean_outcome(folder.string(), [&] { nj::read_plain_folder(folder.string(), {}).validate(folder.string()); });
  return 0;
}
