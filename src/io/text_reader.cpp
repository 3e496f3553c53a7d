#include "nj/io/text_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "nj/core/printable.hpp"

namespace nj {
namespace {

constexpr unsigned kGzipBufferBytes = 1U << 17U;
constexpr std::size_t kChunkBytes = 1U << 16U;

template <typename T>
T parse_number(std::string_view field, const TextReader& at, std::string_view what) {
  T value{};
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error == std::errc::result_out_of_range) at.fail("'{}' is out of range for a {}", printable(field), what);
  if (error != std::errc() || end != field.data() + field.size())
    at.fail("'{}' is not a valid {}", printable(field), what);
  return value;
}

// The callback of this thread's ReadProgress; empty where none lives.
thread_local ProgressCallback read_progress;

}  // namespace

ReadProgress::ReadProgress(ProgressCallback progress) {
  NJ_EXPECTS(!read_progress, "a ReadProgress is already active on this thread");
  read_progress = std::move(progress);
}

ReadProgress::~ReadProgress() { read_progress = nullptr; }

TextReader::TextReader(std::string path) : path_(std::move(path)), chunk_(kChunkBytes) {
  NJ_REQUIRE(std::filesystem::is_regular_file(path_), "{}: no such file", path_);
  file_ = gzopen(path_.c_str(), "rb");
  NJ_REQUIRE(file_ != nullptr, "{}: cannot open: {}", path_, std::strerror(errno));
  gzbuffer(file_, kGzipBufferBytes);
  file_bytes_ = static_cast<std::int64_t>(std::filesystem::file_size(path_));
}

TextReader::~TextReader() { gzclose(file_); }

bool TextReader::next_line(std::string_view& line) {
  line_.clear();
  // Lines are cut at '\n' here rather than by gzgets, which cannot tell a NUL byte in a line from its end.
  while (true) {
    if (chunk_begin_ == chunk_end_) {
      const int read = gzread(file_, chunk_.data(), static_cast<unsigned>(chunk_.size()));
      int status = Z_OK;
      const char* message = gzerror(file_, &status);
      if (status < 0) throw InputError(fmt::format("{}: read error: {}", path_, message));  // e.g. a truncated .gz
      if (read <= 0) break;
      chunk_begin_ = 0;
      chunk_end_ = static_cast<std::size_t>(read);
    }
    const char* begin = chunk_.data() + chunk_begin_;
    const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', chunk_end_ - chunk_begin_));
    const std::size_t length =
        newline != nullptr ? static_cast<std::size_t>(newline - begin) + 1 : chunk_end_ - chunk_begin_;
    line_.append(begin, length);
    chunk_begin_ += length;
    if (newline != nullptr) break;
  }
  if (read_progress) {
    // gzoffset: how far into the file on disk (compressed or not) reading has got.
    const std::int64_t offset = line_.empty() ? file_bytes_ : static_cast<std::int64_t>(gzoffset(file_));
    if (offset >= next_report_ || line_.empty()) {  // and once at the end
      next_report_ = offset + std::max<std::int64_t>(file_bytes_ / 100, 1);
      read_progress(std::filesystem::path(path_).filename().string(), std::min(offset, file_bytes_), file_bytes_);
    }
  }
  if (line_.empty()) return false;
  ++line_number_;
  line = line_;
  if (line.ends_with('\n')) line.remove_suffix(1);
  if (line.ends_with('\r')) line.remove_suffix(1);
  return true;
}

bool Fields::next(std::string_view& field) {
  const auto first = rest_.find_first_not_of(separators_);
  if (first == std::string_view::npos) return false;
  rest_.remove_prefix(first);
  const auto length = std::min(rest_.find_first_of(separators_), rest_.size());
  field = rest_.substr(0, length);
  rest_.remove_prefix(length);
  return true;
}

bool TextReader::next_record(std::string_view& line) {
  while (next_line(line)) {
    if (!is_blank_or_comment(line)) return true;
  }
  return false;
}

bool is_blank_or_comment(std::string_view line) {
  const auto first = line.find_first_not_of(kWhitespace);
  return first == std::string_view::npos || line[first] == '#' || line[first] == '%';
}

std::int64_t parse_integer(std::string_view field, const TextReader& at, std::string_view what) {
  return parse_number<std::int64_t>(field, at, what);
}

float parse_float(std::string_view field, const TextReader& at, std::string_view what) {
  return parse_number<float>(field, at, what);
}

std::vector<std::int64_t> read_header_integers(const std::string& path, std::size_t count) {
  TextReader reader(path);
  std::string_view line;
  NJ_REQUIRE(reader.next_record(line), "{}: empty file", path);
  std::vector<std::int64_t> values;
  Fields fields(line, kWhitespaceOrComma);
  std::string_view field;
  while (fields.next(field)) values.push_back(parse_integer(field, reader, "integer"));
  if (values.size() != count) reader.fail("expected {} integers, found {}", count, values.size());
  return values;
}

}  // namespace nj
