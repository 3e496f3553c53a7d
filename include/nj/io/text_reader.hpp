#pragma once
// Line-oriented reading of the text formats `nj convert` accepts: plain or gzip-compressed files alike, with
// every parse error naming file:line, and number parsing that does not go through iostreams (the larger
// inputs have millions of tokens).
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/core/progress.hpp"

struct gzFile_s;  // zlib's file handle, kept out of this header

namespace nj {

// Field separators: whitespace only (`col:value` lists), or whitespace and commas (ids, labels, dense rows;
// OGB's CSV files).
inline constexpr std::string_view kWhitespace = " \t";
inline constexpr std::string_view kWhitespaceOrComma = " \t,";

// While one lives, the TextReaders of its thread tell `progress` how far they are through each file (bytes of
// the file on disk; the stage is the file's name): how `nj convert` shows progress through readers that take no
// callback of their own.
class ReadProgress {
 public:
  explicit ReadProgress(ProgressCallback progress);
  ReadProgress(const ReadProgress&) = delete;
  ReadProgress& operator=(const ReadProgress&) = delete;
  ~ReadProgress();
};

class TextReader {
 public:
  // Opens a plain or gzip file (zlib tells them apart by content); throws InputError when it cannot.
  explicit TextReader(std::string path);
  TextReader(const TextReader&) = delete;
  TextReader& operator=(const TextReader&) = delete;
  ~TextReader();

  // The next line without its "\n" or "\r\n", valid until the next call; false at the end of the file.
  bool next_line(std::string_view& line);
  // The next line that is neither blank nor a comment (is_blank_or_comment); false at the end of the file.
  bool next_record(std::string_view& line);

  const std::string& path() const { return path_; }
  std::int64_t line_number() const { return line_number_; }

  // Throws InputError "path:line: message" about the line last read.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw InputError(fmt::format("{}:{}: {}", path_, line_number_, fmt::format(format, std::forward<Args>(args)...)));
  }

 private:
  std::string path_;
  gzFile_s* file_ = nullptr;
  std::vector<char> chunk_;  // decompressed bytes; those in [chunk_begin_, chunk_end_) are not yet in a line
  std::size_t chunk_begin_ = 0;
  std::size_t chunk_end_ = 0;
  std::string line_;
  std::int64_t line_number_ = 0;
  std::int64_t file_bytes_ = 0;
  std::int64_t next_report_ = 0;  // the file offset at which ReadProgress hears next
};

// The fields of one line, split at runs of separator characters.
class Fields {
 public:
  Fields(std::string_view line, std::string_view separators) : rest_(line), separators_(separators) {}
  // Moves to the next field; false when none is left.
  bool next(std::string_view& field);

 private:
  std::string_view rest_;
  std::string_view separators_;
};

// True for lines that carry no data: empty, whitespace only, or a `#` or `%` comment.
bool is_blank_or_comment(std::string_view line);

// Parse a whole field or throw, naming the reader's file:line, the field and `what` it should have been.
std::int64_t parse_integer(std::string_view field, const TextReader& at, std::string_view what);
float parse_float(std::string_view field, const TextReader& at, std::string_view what);

// The `count` integers on the first data line of a small header file (meta.txt, OGB's num-node-list).
std::vector<std::int64_t> read_header_integers(const std::string& path, std::size_t count);

}  // namespace nj
