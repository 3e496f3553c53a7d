#include "nj/io/sorted_edge_list.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <queue>

#include "nj/core/error.hpp"
#include "nj/core/mix64.hpp"
#include "nj/core/release.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// An edge as one sortable word: destination in the high half, source in the low (both below 2^31).
using EdgeKey = std::uint64_t;
EdgeKey key_of(vid_t source, vid_t destination) {
  return (static_cast<EdgeKey>(destination) << 32U) | static_cast<EdgeKey>(source);
}
vid_t source_of(EdgeKey key) { return static_cast<vid_t>(key & 0xFFFFFFFFU); }
vid_t destination_of(EdgeKey key) { return static_cast<vid_t>(key >> 32U); }

// Ids the first pass over a relabelled edge list makes room for at first: beyond them its array grows as it fills.
constexpr std::int64_t kFirstRoom = std::int64_t{1} << 24;

// Keys per read or write buffer of a run file while merging.
constexpr std::size_t kMergeBufferKeys = std::size_t{1} << 16;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const fs::path& path, const char* mode) {
  File file(std::fopen(path.c_str(), mode));
  NJ_REQUIRE(file != nullptr, "{}: cannot open for {} (is the scratch folder writable?)", path.string(),
             mode[0] == 'r' ? "reading" : "writing");
  return file;
}

template <typename T>
void write_all(std::FILE* file, std::span<const T> values, const fs::path& path) {
  NJ_REQUIRE(std::fwrite(values.data(), sizeof(T), values.size(), file) == values.size(),
             "{}: write failed (is the scratch folder's disk full?)", path.string());
}

// The runs of one sort, in a scratch folder of their own that goes with them.
class Runs {
 public:
  explicit Runs(const std::string& scratch) {
    const fs::path parent = scratch.empty() ? fs::temp_directory_path() : fs::path(scratch);
    fs::create_directories(parent);
    std::string pattern = (parent / "nj-sort-XXXXXX").string();
    NJ_REQUIRE(mkdtemp(pattern.data()) != nullptr, "{}: cannot make a scratch folder for the sort", parent.string());
    folder_ = pattern;
  }
  Runs(const Runs&) = delete;
  Runs& operator=(const Runs&) = delete;
  ~Runs() {
    std::error_code ignored;
    fs::remove_all(folder_, ignored);
  }

  // Sorts the keys and writes them as the next run.
  void add(std::vector<EdgeKey>& keys) {
    if (keys.empty()) return;
    largest_ = std::max(largest_, static_cast<std::int64_t>(keys.size()));
    std::sort(keys.begin(), keys.end());
    const fs::path path = run_path(count_++);
    const File file = open_file(path, "wb");
    write_all<EdgeKey>(file.get(), keys, path);
    keys.clear();
  }
  int count() const { return count_; }
  std::int64_t largest() const { return largest_; }
  fs::path run_path(int run) const { return folder_ / ("run-" + std::to_string(run)); }
  fs::path folder() const { return folder_; }

 private:
  fs::path folder_;
  int count_ = 0;
  std::int64_t largest_ = 0;
};

// Reads a run back a buffer at a time.
class RunReader {
 public:
  explicit RunReader(fs::path path) : path_(std::move(path)), file_(open_file(path_, "rb")) { refill(); }
  bool done() const { return at_ == buffer_.size(); }
  EdgeKey front() const { return buffer_[at_]; }
  void pop() {
    if (++at_ == buffer_.size()) refill();
  }

 private:
  void refill() {
    buffer_.resize(kMergeBufferKeys);
    buffer_.resize(std::fread(buffer_.data(), sizeof(EdgeKey), buffer_.size(), file_.get()));
    NJ_REQUIRE(std::ferror(file_.get()) == 0, "{}: read failed", path_.string());
    at_ = 0;
  }
  fs::path path_;
  File file_;
  std::vector<EdgeKey> buffer_;
  std::size_t at_ = 0;
};

// Merges sorted runs into one stream of keys, ascending.
class Merge {
 public:
  explicit Merge(const Runs& runs) {
    for (int run = 0; run < runs.count(); ++run) {
      readers_.push_back(std::make_unique<RunReader>(runs.run_path(run)));
      if (!readers_.back()->done()) heap_.emplace(readers_.back()->front(), run);
    }
  }
  bool next(EdgeKey& key) {
    if (heap_.empty()) return false;
    const auto [smallest, run] = heap_.top();
    heap_.pop();
    key = smallest;
    RunReader& reader = *readers_[static_cast<std::size_t>(run)];
    reader.pop();
    if (!reader.done()) heap_.emplace(reader.front(), run);
    return true;
  }

 private:
  using Entry = std::pair<EdgeKey, int>;
  std::vector<std::unique_ptr<RunReader>> readers_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

// The merged edges as build_csr keeps them, each destination's sources ascending, written to a scratch file of
// sources while the offsets are counted. Also adds up a hash of every edge and of its reverse: the graph is symmetric
// (every edge's reverse there as often) exactly when the multisets agree, which equal sums tell with certainty but
// for a 2^-64 chance.
class CsrWriter {
 public:
  CsrWriter(vid_t vertices, const EdgeListOptions& options, const fs::path& sources_path)
      : options_(options), path_(sources_path), file_(open_file(sources_path, "wb")) {
    offsets_.assign(static_cast<std::size_t>(vertices) + 1, 0);
  }
  void add(EdgeKey key) {
    const vid_t destination = destination_of(key);
    const vid_t source = source_of(key);
    if (options_.self_loops == SelfLoops::kRemove && source == destination) return;
    if (options_.duplicates == Duplicates::kRemove && has_previous_ && key == previous_) return;
    while (current_ < destination) end_destination();
    if (options_.self_loops == SelfLoops::kAddMissing && !self_loop_seen_ && source > destination) {
      emit(destination, destination);
    }
    emit(source, destination);
    previous_ = key;
    has_previous_ = true;
  }
  // Ends the last destinations; returns the offsets and whether the graph is symmetric.
  std::vector<eid_t> finish(bool& symmetric) {
    while (current_ < static_cast<vid_t>(offsets_.size()) - 1) end_destination();
    flush();
    NJ_REQUIRE(std::fflush(file_.get()) == 0, "{}: write failed", path_.string());
    symmetric = forward_hash_ == reverse_hash_;
    return std::move(offsets_);
  }

 private:
  void emit(vid_t source, vid_t destination) {
    self_loop_seen_ = self_loop_seen_ || source == destination;
    buffer_.push_back(source);
    ++offsets_[static_cast<std::size_t>(destination) + 1];
    forward_hash_ += mix64(key_of(source, destination));
    reverse_hash_ += mix64(key_of(destination, source));
    if (buffer_.size() == kMergeBufferKeys) flush();
  }
  void end_destination() {
    if (options_.self_loops == SelfLoops::kAddMissing && !self_loop_seen_) emit(current_, current_);
    offsets_[static_cast<std::size_t>(current_) + 1] += offsets_[static_cast<std::size_t>(current_)];
    ++current_;
    self_loop_seen_ = false;
  }
  void flush() {
    write_all<vid_t>(file_.get(), buffer_, path_);
    buffer_.clear();
  }

  const EdgeListOptions& options_;
  fs::path path_;
  File file_;
  std::vector<eid_t> offsets_;
  std::vector<vid_t> buffer_;
  vid_t current_ = 0;
  bool self_loop_seen_ = false;
  EdgeKey previous_ = 0;
  bool has_previous_ = false;
  std::uint64_t forward_hash_ = 0;
  std::uint64_t reverse_hash_ = 0;
};

// The ids an edge list's vertices are numbered by, from a first pass over it, which also counts its edges and, where
// the ids are relabelled, the most ids it read between two times it made them distinct.
VertexIds vertex_ids(const std::string& path, const VertexIdOptions& options, std::int64_t run_keys,
                     std::int64_t& edges, std::int64_t& largest_id_run) {
  edges = 0;
  if (!options.relabel) {
    std::int64_t largest = 0;
    for_each_edge_id(path, options, [&](std::int64_t src, std::int64_t dst) {
      largest = std::max({largest, src, dst});
      ++edges;
    });
    return dense_vertex_ids(path, options, largest);
  }
  // The distinct ids so far, then those read since they were last made distinct. Room for a run of them is made once
  // a run, so that the array never grows by doubling past what it holds.
  std::vector<std::int64_t> ids;
  std::size_t distinct = 0;
  const auto make_distinct = [&] {
    largest_id_run = std::max(largest_id_run, static_cast<std::int64_t>(ids.size() - distinct));
    ids = sorted_distinct(std::move(ids));
    distinct = ids.size();
  };
  // Room for 2^24 ids at first, not the whole run, so that a small file does not reserve half of --memory.
  const auto room = [&] { return distinct + static_cast<std::size_t>(std::min(run_keys, kFirstRoom)) + 2; };
  ids.reserve(room());
  for_each_edge_id(path, options, [&](std::int64_t src, std::int64_t dst) {
    ++edges;
    ids.insert(ids.end(), {src, dst});
    if (static_cast<std::int64_t>(ids.size() - distinct) >= run_keys) {
      make_distinct();
      ids.reserve(room());
    }
  });
  make_distinct();
  // Held to the end of the conversion: exactly the distinct ids, not the room of a run.
  return VertexIds::relabelled(std::vector<std::int64_t>(ids.begin(), ids.end()), options.one_based);
}

void copy_sources(const fs::path& sources_path, std::int64_t edges, hdf5::File& file) {
  constexpr hsize_t kEntriesPerChunk = hsize_t{1} << 20;  // as write_dataset chunks it
  const auto total = static_cast<hsize_t>(edges);
  file.create<vid_t>("/graph/indices", {total}, total > 0 ? std::min(total, kEntriesPerChunk) : 0);
  const File in = open_file(sources_path, "rb");
  std::vector<vid_t> buffer(kEntriesPerChunk);
  for (std::int64_t first = 0; first < edges;) {
    const std::size_t read = std::fread(buffer.data(), sizeof(vid_t), buffer.size(), in.get());
    NJ_REQUIRE(read > 0, "{}: read failed", sources_path.string());
    file.write_rows<vid_t>("/graph/indices", first, std::span(buffer).first(read));
    first += static_cast<std::int64_t>(read);
  }
}

}  // namespace

SortedGraph write_sorted_edge_list(const std::string& path, const VertexIdOptions& ids, const EdgeListOptions& options,
                                   const ExternalSortOptions& sort, hdf5::File& file) {
  const std::int64_t run_keys = std::max<std::int64_t>(sort.run_bytes / sizeof(EdgeKey), 2);
  SortedGraph graph;
  std::int64_t input_edges = 0;
  graph.ids = vertex_ids(path, ids, run_keys, input_edges, graph.largest_id_run);
  sort.end_phase();
  Runs runs(sort.scratch);
  std::vector<EdgeKey> keys;
  // Sized once, so that a run never holds a grown array beside the one it outgrew.
  keys.reserve(static_cast<std::size_t>(std::min(run_keys, input_edges * (options.symmetrize ? 2 : 1) + 1)));
  for_each_edge_id(path, ids, [&](std::int64_t src_id, std::int64_t dst_id) {
    const vid_t src = graph.ids.find(src_id);
    const vid_t dst = graph.ids.find(dst_id);
    keys.push_back(key_of(src, dst));
    if (options.symmetrize && src != dst) keys.push_back(key_of(dst, src));
    if (static_cast<std::int64_t>(keys.size()) + 1 >= run_keys) runs.add(keys);
  });
  runs.add(keys);
  release_vector(keys);
  sort.end_phase();
  graph.runs = runs.count();
  graph.largest_run = runs.largest();
  CsrWriter writer(graph.ids.count(), options, runs.folder() / "sources");
  Merge merge(runs);
  for (EdgeKey key = 0; merge.next(key);) writer.add(key);
  bool symmetric = false;
  graph.offsets = writer.finish(symmetric);
  graph.symmetrized = options.symmetrize || symmetric;
  graph.self_loops = self_loop_policy_of(options.self_loops);
  file.write<eid_t>("/graph/indptr", graph.offsets, {graph.offsets.size()});
  copy_sources(runs.folder() / "sources", graph.num_edges(), file);
  sort.end_phase();
  return graph;
}

}  // namespace nj
