// nj: the NeutronJittor command line. Every error surfaces here as one line on stderr and a non-zero exit.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/interruption.hpp"
#include "cli/logging.hpp"
#include "cli/suggestions.hpp"
#include "nj/core/error.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/version.hpp"
#include "nj/kernels/blas_kernels.hpp"

namespace {

// Exit statuses: 1 for an error at run time (a file, the machine, training itself), 2 for a mistake in the command
// line, 128 + N where signal N stopped training.
constexpr int kUsageExit = 2;

// OpenBLAS chose its kernels as the process loaded (blas_kernels.hpp). Where it chose weaker ones than the CPU
// runs, and OPENBLAS_CORETYPE was left unset, the process starts again with it naming the CPU's, before MPI or
// any file is opened; where it cannot, it goes on with the kernels it has.
void restart_with_the_cpus_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::optional<std::string> core = nj::better_openblas_core(nj::openblas_core(), nj::cpu_features());
  if (!core) return;
  std::error_code error;
  // Started by its own path, not /proc/self/exe, so that ps and pgrep still see it as nj.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error || setenv("OPENBLAS_CORETYPE", core->c_str(), 1) != 0) return;
  execv(self.c_str(), argv);
  unsetenv("OPENBLAS_CORETYPE");  // what this process starts picks its own
  spdlog::warn(
      "OpenBLAS runs its {} kernels on a CPU that runs its {} kernels, and nj could not start again with "
      "them: run it with OPENBLAS_CORETYPE={}",
      nj::openblas_core(), *core, *core);
}

// Ends the process once everything it wrote is flushed, without the libraries' destructors: the CUDA libraries' touch
// about 60 MB of their pages at exit, which would set the process's peak resident memory (what a cgroup limit and the
// host-memory forecast count) above anything it held while it worked. MPI was finalised before. The sanitizers' leak
// check runs at exit, so their builds exit as usual.
[[noreturn]] void end_process(int code) {
  spdlog::shutdown();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::exit(code);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  std::exit(code);
#endif
#endif
  _exit(code);
}

int run_command_line(int argc, char** argv) {
  // Until the command line is read: what its defaults give, so that nothing logged before is coloured in a file.
  nj::cli::set_up_logging("info", "auto");
  restart_with_the_cpus_blas_kernels(argv);
  // Large arrays (features, rows, plans) are mapped and unmapped on their own. glibc otherwise raises its mmap
  // threshold after the first large free and serves the next large arrays from the heap, where freed ones stay
  // resident: a quarter more resident memory than live memory on small graphs, and a peak nj plan could not
  // predict.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Under a launcher every rank runs this same main; MPI lives as long as the session.
  nj::MpiSession mpi;
  const std::unique_ptr<nj::Communicator> comm = mpi.communicator();
  nj::resident_at_start();  // what the code, the libraries and MPI hold: every forecast of host memory counts it
  CLI::App app{"NeutronJittor: full-graph GNN training beyond device memory", "nj"};
  app.require_subcommand(1);
  // A flag given twice takes its last value, so scripts can append overrides to a fixed command line.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // nj's own options (--log-level, --color) may follow the subcommand too, as its own do.
  app.fallthrough();
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return "nj: error: " + nj::cli::parse_failure_message(*failed, e) + "\n";
  });
  app.set_version_flag("--version", std::string(nj::kVersion));
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "Logging level")
      ->check(nj::cli::one_of({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  std::string color = "auto";
  app.add_option("--color", color,
                 "Colour the log: auto (where standard output is a terminal the user sees, not a rank of mpirun or "
                 "srun, and NO_COLOR is unset), always, or never")
      ->check(nj::cli::one_of({"auto", "always", "never"}))
      ->capture_default_str();
  app.parse_complete_callback([&] { nj::cli::set_up_logging(log_level, color); });

  nj::cli::add_convert_command(app);
  nj::cli::add_generate_command(app, *comm);
  nj::cli::add_info_command(app);
  nj::cli::add_train_command(app, *comm);
  nj::cli::add_infer_command(app, *comm);
  nj::cli::add_plan_command(app);
  nj::cli::add_partition_command(app, *comm);
  // Only generating, partitioning, training and inference run as many ranks; under a launcher every other command
  // would run once per rank, writing the same files.
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string name = command->get_name();
    if (name == "train" || name == "infer" || name == "partition" || name == "generate") continue;
    command->parse_complete_callback([command, &comm] {
      if (comm->size() == 1) return;
      throw nj::JobError(fmt::format("nj {} runs as one process: start it without mpirun or srun", command->get_name()),
                         0, comm->rank() == 0);
    });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line and fails alike: one of them says so. --help and --version succeed; a
    // command line that cannot be parsed is a usage error.
    const int printed = comm->rank() == 0 ? app.exit(e) : e.get_exit_code();
    return printed == 0 ? 0 : kUsageExit;
  } catch (const nj::UsageError& e) {
    std::cerr << "nj: error: " << e.what() << std::endl;
    return kUsageExit;
  } catch (const nj::cli::Interrupted& e) {
    if (e.report()) std::cerr << "nj: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const nj::JobError& e) {
    // Every rank knows of it: one says what it is, and all end without an abort.
    if (e.report()) {
      std::cerr << "nj: error: " << (comm->size() > 1 ? fmt::format("rank {}: ", e.failed_rank()) : "") << e.what()
                << std::endl;
    }
    return e.exit_code();
  } catch (const std::exception& e) {
    if (comm->size() == 1) {
      std::cerr << "nj: error: " << e.what() << '\n';
      return 1;
    }
    // The other ranks may be waiting for this one: end them all rather than leave them hanging.
    std::cerr << "nj: error: rank " << comm->rank() << ": " << e.what() << std::endl;
    comm->abort(1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { end_process(run_command_line(argc, argv)); }
