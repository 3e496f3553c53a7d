#include "cli/logging.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>

#include "nj/comm/communicator.hpp"

namespace nj::cli {
namespace {

bool colour_wanted(std::string_view choice) {
  if (choice == "always") return true;
  if (choice == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && *no_color != '\0') return false;
  const bool launched_rank = MpiSession::launched() || std::getenv("SLURM_PROCID") != nullptr;
  return !launched_rank && isatty(STDERR_FILENO) != 0;
}

}  // namespace

void set_up_logging(std::string_view level, std::string_view color) {
  const auto mode = colour_wanted(color) ? spdlog::color_mode::always : spdlog::color_mode::never;
  auto logger = std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::ansicolor_stderr_sink_mt>(mode));
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

void print_result(const std::string& line) {
  spdlog::default_logger()->flush();
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

}  // namespace nj::cli
