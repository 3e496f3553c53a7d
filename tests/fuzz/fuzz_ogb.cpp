// Fuzz target of the OGB folder reader, `nj convert --format ogb`: nj::ogb_files, then the folder's edges read as
// read_edge_list reads them (what nj convert's sort on disk equals, SortedEdgeList.* checks) and the dataset built and
// checked as convert checks it. The first byte of an input says which of the folder's files exist (bit i for kFiles[i])
// and, in bit 7, whether they are plain .csv rather than .csv.gz; the rest, split at 0xff bytes, are their texts in
// that order (missing pieces are empty), gzipped as OGB ships them.
#include <array>
#include <filesystem>

#include "nj/io/edge_list.hpp"
#include "nj/io/ogb.hpp"
#include "nj/io/plain_text.hpp"
#include "target_support.hpp"

namespace {
constexpr std::array kFiles = {"raw/edge",           "raw/node-feat",      "raw/node-label",   "raw/num-node-list",
                               "split/scheme/train", "split/scheme/valid", "split/scheme/test"};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  ByteSource input({data, size});
  const std::uint8_t present = input.byte();
  const bool plain_csv = (present & 128U) != 0;
  const std::vector<Bytes> pieces = split(input.take(size), 0xff);
  const std::filesystem::path folder = scratch_dir() / "ogb";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder / "raw");
  std::filesystem::create_directories(folder / "split" / "scheme");
  std::size_t next = 0;
  for (std::size_t i = 0; i < kFiles.size(); ++i) {
    if ((present & (1U << i)) == 0) continue;
    const Bytes text = next < pieces.size() ? pieces[next] : Bytes{};
    ++next;
    if (plain_csv) {
      write_file(folder / (std::string(kFiles[i]) + ".csv"), text);
    } else {
      write_file(folder / (std::string(kFiles[i]) + ".csv.gz"), gzip(text));
    }
  }
  expect_clean_outcome(folder.string(), [&] {
    const nj::OgbFiles files = nj::ogb_files(folder.string(), {}, "");
    nj::build_dataset(nj::read_edge_list(files.edges, files.options.ids), files.options).validate(folder.string());
  });
  return 0;
}
