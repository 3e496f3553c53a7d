// --config: the TOML that option files need, read line by line so that every error names its line. A line is
// empty, a comment (`#`), or `key = value`, where the value is a string ("..." with \" \\ \n \t \r escapes, or
// '...' taken as written), a word (a number, true, false, or any text without spaces, taken as written), or an
// array of those on the one line; a comment may follow it. Tables ([section]) name no option of one command, and a key
// given twice would leave one of its values unused: both are errors, as anything else is.
#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli/commands.hpp"
#include "cli/suggestions.hpp"
#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"

namespace nj::cli {
namespace {

struct ConfigEntry {
  std::string key;
  std::vector<std::string> values;  // an array's elements, or the one value
  int line = 0;
};

// One line's text, read from its start; every error names the file and the line.
class LineParser {
 public:
  LineParser(std::string_view text, const std::string& file, int line) : text_(text), file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", file_, line_, what));
  }
  void skip_spaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t')) ++at_;
  }
  // True at the end of the line or of what precedes a comment.
  bool at_end() {
    skip_spaces();
    return at_ == text_.size() || text_[at_] == '#';
  }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  bool accept(char c) {
    skip_spaces();
    if (peek() != c) return false;
    ++at_;
    return true;
  }

  std::string key() {
    skip_spaces();
    const std::size_t start = at_;
    while (at_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[at_])) != 0 || text_[at_] == '-' || text_[at_] == '_')) {
      ++at_;
    }
    if (at_ == start) fail(fmt::format("expected `key = value`, found '{}'", printable(text_.substr(start))));
    return std::string(text_.substr(start, at_ - start));
  }

  // The values of the rest of the line: one, or an array's.
  std::vector<std::string> values() {
    skip_spaces();
    std::vector<std::string> values;
    if (accept('[')) {
      while (!accept(']')) {
        if (at_end()) fail("an array must end on its line, with ']'");
        values.push_back(scalar());
        if (accept(',')) continue;
        skip_spaces();
        if (peek() != ']') fail("expected ',' or ']' in the array");
      }
    } else {
      if (at_end()) fail("a key without a value");
      values.push_back(scalar());
    }
    if (!at_end()) fail(fmt::format("unexpected '{}' after the value", printable(text_.substr(at_))));
    return values;
  }

 private:
  std::string scalar() {
    skip_spaces();
    if (peek() == '"') return basic_string();
    if (peek() == '\'') return literal_string();
    const std::size_t start = at_;
    while (at_ < text_.size() && std::string_view(" \t,]#").find(text_[at_]) == std::string_view::npos) ++at_;
    if (at_ == start) fail(fmt::format("expected a value, found '{}'", printable(text_.substr(at_))));
    return std::string(text_.substr(start, at_ - start));
  }

  std::string basic_string() {
    ++at_;  // the opening quote
    std::string value;
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ == text_.size()) break;
        switch (const char escaped = text_[at_++]) {
          case '"': c = '"'; break;
          case '\\': c = '\\'; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          default: fail(fmt::format("unsupported escape '\\{}' in a string", printable(std::string(1, escaped))));
        }
      }
      value += c;
    }
    if (at_ == text_.size()) fail("a string must end on its line, with '\"'");
    ++at_;
    return value;
  }

  std::string literal_string() {
    const std::size_t end = text_.find('\'', at_ + 1);
    if (end == std::string_view::npos) fail("a string must end on its line, with \"'\"");
    std::string value(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return value;
  }

  std::string_view text_;
  const std::string& file_;
  int line_;
  std::size_t at_ = 0;
};

std::vector<ConfigEntry> read_config_entries(const std::string& path) {
  std::ifstream in(path);
  NJ_REQUIRE(in.is_open(), "{}: cannot open", path);
  std::vector<ConfigEntry> entries;
  std::map<std::string, int> first_line;
  int number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    if (text.ends_with('\r')) text.pop_back();
    LineParser line(text, path, number);
    if (line.at_end()) continue;
    if (line.peek() == '[') {
      line.fail("tables ([section]) are not read: give every option at the top level, before any table");
    }
    ConfigEntry entry{line.key(), {}, number};
    if (!line.accept('=')) line.fail(fmt::format("expected '=' after '{}'", entry.key));
    entry.values = line.values();
    if (const auto [previous, inserted] = first_line.emplace(entry.key, number); !inserted) {
      line.fail(fmt::format("'{}' is given twice (first on line {})", entry.key, previous->second));
    }
    entries.push_back(std::move(entry));
  }
  NJ_REQUIRE(in.eof(), "{}: read failed", path);
  return entries;
}

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

}  // namespace

void apply_config_file(CLI::App& command, const std::string& path) {
  const std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  for (const ConfigEntry& entry : read_config_entries(path)) {
    const std::string& key = entry.key;
    const auto where = fmt::format("{}:{}", path, entry.line);
    CLI::Option* option = command.get_option_no_throw("--" + key);
    if (option == nullptr || key == "config") {
      const auto name = closest_name(key, long_option_names(command));
      throw InputError(fmt::format("{}: unknown option '{}' for nj {}{}", where, key, command.get_name(),
                                   name ? fmt::format("; did you mean '{}'?", *name) : ""));
    }
    // The command line wins, whether it gave the option or the positional argument of the same name.
    if (given(option) || given(command.get_option_no_throw(key))) continue;
    NJ_REQUIRE(!entry.values.empty(), "{}: option '{}' has no value", where, key);
    try {
      for (const std::string& value : entry.values) {
        const bool relative_path = option->get_type_name() == kPathType && std::filesystem::path(value).is_relative();
        option->add_result(relative_path ? (folder / value).lexically_normal().string() : value);
      }
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(fmt::format("{}: option '{}': {}", where, key, printable(e.what())));
    }
  }
}

}  // namespace nj::cli
