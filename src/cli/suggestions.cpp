#include "cli/suggestions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "nj/core/printable.hpp"

namespace nj::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  std::iota(d[0].begin(), d[0].end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The command the line named: the deepest subcommand parsed, or the app itself.
const CLI::App& named_command(const CLI::App& app) {
  const CLI::App* command = &app;
  for (std::vector<CLI::App*> parsed = app.get_subcommands(); !parsed.empty();
       parsed = parsed.front()->get_subcommands())
    command = parsed.front();
  return *command;
}

}  // namespace

std::optional<std::string> closest_name(std::string_view typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(1, typed.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(typed, candidate);
    if (distance > 0 && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::vector<std::string> long_option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* level = &command; level != nullptr; level = level->get_parent()) {
    for (const CLI::Option* option : level->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back(name);
    }
  }
  return names;
}

std::string parse_failure_message(const CLI::App& app, const CLI::Error& error) {
  const CLI::App& command = named_command(app);
  const std::vector<std::string> left_over = app.remaining(true);
  if (&command == &app) {
    const auto word =
        std::find_if(left_over.begin(), left_over.end(), [](const std::string& a) { return !a.starts_with("-"); });
    if (word != left_over.end()) {
      std::vector<std::string> commands;
      for (const CLI::App* subcommand : app.get_subcommands([](const CLI::App*) { return true; }))
        commands.push_back(subcommand->get_name());
      const auto name = closest_name(*word, commands);
      return fmt::format("'{}' is not a command of {}{}", printable(*word), app.get_name(),
                         name ? fmt::format("; did you mean '{}'?", *name) : std::string());
    }
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    // The first unknown option, or else the first argument left over, and what was probably meant.
    const auto option =
        std::find_if(left_over.begin(), left_over.end(), [](const std::string& a) { return a.starts_with("-"); });
    if (option == left_over.end()) {
      return fmt::format("unexpected argument '{}' for nj {}", printable(left_over.front()), command.get_name());
    }
    const std::string typed = option->substr(0, option->find('='));
    const auto name =
        typed.starts_with("--") ? closest_name(typed.substr(2), long_option_names(command)) : std::nullopt;
    return fmt::format("unknown option '{}' for nj {}{}", printable(typed), command.get_name(),
                       name ? fmt::format("; did you mean '--{}'?", *name) : std::string());
  }
  std::string message = error.what();
  // "--hidden: must be at least 1" (validators.hpp) reads "--hidden must be at least 1".
  if (const auto colon = message.find(": must "); colon != std::string::npos) message.erase(colon, 1);
  return message;
}

}  // namespace nj::cli
