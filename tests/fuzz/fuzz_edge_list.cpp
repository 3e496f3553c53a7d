// Fuzz target of the edge-list reader, `nj convert --format edgelist`: nj::read_edge_list, then the dataset
// built from it as convert builds and checks it. The first byte of an input chooses the options (bits: 0
// --one-based, 1 --relabel, 2 --num-vertices given by the second byte, 3 --undirected, 4-5 --self-loops keep,
// remove or add, 6 --duplicates remove, 7 the file is gzipped); the rest is the file.
#include "nj/io/plain_text.hpp"
#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  ByteSource input({data, size});
  const std::uint8_t flags = input.byte();
  nj::ConvertOptions options;
  options.ids.one_based = (flags & 1U) != 0;
  options.ids.relabel = (flags & 2U) != 0;
  // As the command line: a positive count, and never with --relabel.
  if ((flags & 4U) != 0 && !options.ids.relabel) options.ids.num_vertices = input.byte() + 1;
  options.graph.symmetrize = (flags & 8U) != 0;
  const unsigned self_loops = (flags >> 4U) & 3U;
  options.graph.self_loops = self_loops == 1   ? nj::SelfLoops::kRemove
                             : self_loops == 2 ? nj::SelfLoops::kAddMissing
                                               : nj::SelfLoops::kKeep;
  options.graph.duplicates = (flags & 64U) != 0 ? nj::Duplicates::kRemove : nj::Duplicates::kKeep;
  const Bytes text = input.take(size);
  const std::string path = (scratch_dir() / "edges.txt").string();
  write_file(path, (flags & 128U) != 0 ? gzip(text) : std::vector<std::uint8_t>(text.begin(), text.end()));
  expect_clean_outcome(path, [&] {
    const nj::Dataset dataset = nj::build_dataset(nj::read_edge_list(path, options.ids), options);
    dataset.validate(path);
  });
  return 0;
}
