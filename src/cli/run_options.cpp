// The options nj train and nj plan share: where the data comes from, and those of training that nj plan accepts
// and ignores, so that either command runs a command line or configuration file written for the other.
#include "cli/commands.hpp"
#include "nj/core/error.hpp"

namespace nj::cli {

std::string DataArguments::dataset() const {
  NJ_USAGE(positional_dataset.empty() || dataset_option.empty(),
           "two datasets: {} as the argument and {} with --dataset; give one", positional_dataset, dataset_option);
  return positional_dataset.empty() ? dataset_option : positional_dataset;
}

void add_data_options(CLI::App& command, DataArguments& args, const std::string& dataset_help) {
  command
      .add_option("--config", args.config_file,
                  "Read options from a TOML file (keys are the long option names; flags given here win; relative "
                  "paths in it are relative to its folder)")
      ->type_name(kPathType);
  command.add_option("dataset", args.positional_dataset, dataset_help)->type_name(kPathType);
  command.add_option("--dataset", args.dataset_option, "The dataset, as an option")->type_name(kPathType);
  command
      .add_option("--partitions", args.partitions,
                  "Partition folder written by nj partition: each rank reads only its own shard (its part count "
                  "must equal the number of ranks)")
      ->type_name(kPathType);
}

void add_training_only_options(CLI::App& command, TrainingOnlyArguments& args, const std::string& group) {
  const auto add = [&](const std::string& name, auto& value, const std::string& help) {
    return command.add_option(name, value, help)->group(group);
  };
  add("--partition-method", args.partition_method,
      "How several ranks partition a dataset given without --partitions: scotch or contiguous in parallel, each rank "
      "reading a slice of the file; metis or random in memory, each rank reading the whole file")
      ->check(one_of({"scotch", "contiguous", "metis", "random"}))
      ->capture_default_str();
  add("--host-memory", args.host_memory,
      "Host memory this rank may use, e.g. 16G (default: what the machine has available, shared by the ranks on "
      "it). Where the fastest plan is forecast to need more, the run is planned keeping fewer tensors in host memory "
      "(the log says what it chose); a run that cannot fit stops before it loads or allocates")
      ->check(byte_size());
  add("--epochs", args.options.epochs, "Epochs (one optimizer step each)")->check(at_least(1))->capture_default_str();
  add("--lr", args.options.adam.lr, "Adam learning rate (may differ from a checkpoint's: fine-tuning)")
      ->capture_default_str();
  add("--weight-decay", args.options.adam.weight_decay, "L2 weight decay added to the gradient")
      ->check(at_least(0))
      ->capture_default_str();
  add("--weight-decay-scope", args.decay_scope, "Parameters decayed: all, or first (layer 1 only, as Kipf's GCN)")
      ->check(one_of({"all", "first"}))
      ->capture_default_str();
  add("--feature-norm", args.feature_norm, "Feature normalisation: none, or row (divide by the row sum)")
      ->check(one_of({"none", "row"}))
      ->capture_default_str();
  add("--eval-every", args.options.eval_every, "Evaluate every k epochs (0: only after the last)")
      ->check(at_least(0))
      ->capture_default_str();
  add("--metrics-out", args.metrics_out, "Write one JSON object per epoch and a summary to this file")
      ->type_name(kPathType);
  add("--save-checkpoint", args.save_checkpoint,
      "Write weights, optimizer state and progress to this file at the end (or where a signal stops training)")
      ->type_name(kPathType);
  add("--load-checkpoint", args.load_checkpoint,
      "Continue from this checkpoint (it must come from the same model, dataset, partitioning and optimizer "
      "settings, or with --allow-other-graph from another graph; model options not given take its values)")
      ->type_name(kPathType);
  command
      .add_flag("--allow-other-graph", args.allow_other_graph,
                "Use a checkpoint trained on another graph (fine-tuning, transfer), with a warning saying what "
                "differs: --load-checkpoint, and nj infer (--resume must be the same run)")
      ->group(group);
  add("--checkpoint-dir", args.checkpoint_dir,
      "Write checkpoints into this folder (checkpoint-<epochs done>.h5, the newest two kept), after the last epoch, "
      "every --checkpoint-every epochs, and where SIGINT, SIGTERM or SIGUSR1 stops training")
      ->type_name(kPathType);
  add("--checkpoint-every", args.checkpoint_every, "Epochs between checkpoints (0: after the last only)")
      ->check(at_least(0))
      ->capture_default_str();
  command
      .add_flag("--keep-best", args.keep_best,
                "Also keep the checkpoint of the epoch with the best validation accuracy, as best.h5 in "
                "--checkpoint-dir")
      ->group(group);
  add("--early-stop", args.options.early_stop_patience,
      "Stop once this many evaluations in a row found no better validation accuracy (0: train every epoch)")
      ->check(at_least(0))
      ->capture_default_str();
  command
      .add_flag("--resume", args.resume,
                "Continue from the newest readable checkpoint of --checkpoint-dir, or start afresh where it has none")
      ->group(group);
}

}  // namespace nj::cli
