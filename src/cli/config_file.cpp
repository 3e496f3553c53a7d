#include <fmt/format.h>

#include "cli/commands.hpp"
#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"

namespace nj::cli {

void apply_config_file(CLI::App& command, const std::string& path) {
  // Keys and CLI11's messages quote the file's text, which may hold any character: printable keeps them one line.
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const CLI::Error& e) {
    throw InputError(fmt::format("{}: {}", path, printable(e.what())));
  }
  for (const CLI::ConfigItem& item : items) {
    const std::string key = item.fullname();
    CLI::Option* option = command.get_option_no_throw("--" + key);
    NJ_REQUIRE(option != nullptr && key != "config", "{}: unknown option '{}' for nj {}", path, printable(key),
               command.get_name());
    if (option->count() > 0) continue;  // the command line wins
    // CLI11 2.1 converts an option's first value without checking that it has one (`seed = [` has none).
    NJ_REQUIRE(!item.inputs.empty(), "{}: option '{}' has no value", path, key);
    try {
      for (const std::string& value : item.inputs) option->add_result(value);
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(fmt::format("{}: option '{}': {}", path, key, printable(e.what())));
    }
  }
}

}  // namespace nj::cli
