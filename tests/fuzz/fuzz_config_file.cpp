// Fuzz target of the TOML configuration reader, `nj train --config`: nj::cli::apply_config_file on the train
// command, as its callback applies it before anything else.
#include "cli/commands.hpp"
#include "target_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  const std::string path = (scratch_dir() / "config.toml").string();
  write_file(path, {data, size});
  static const std::unique_ptr<nj::Communicator> comm = nj::make_single_process_communicator();
  // A fresh command each time, since applying a file fills its options; the app's defaults as in main.cpp.
  CLI::App app;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  nj::cli::add_train_command(app, *comm);
  expect_clean_outcome(path, [&] { nj::cli::apply_config_file(*app.get_subcommand("train"), path); });
  return 0;
}
