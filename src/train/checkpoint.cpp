#include "nj/train/checkpoint.hpp"

#include <filesystem>

#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

std::string describe(const ModelConfig& c) {
  return fmt::format("model={} layers={} hidden={} heads={} output_heads={} activation={}", to_string(c.kind), c.layers,
                     c.hidden, c.heads, c.output_heads, to_string(c.activation));
}

void write_matrix(hdf5::File& file, const std::string& name, const Matrix& m) {
  file.write<float>(name, m.span(), {static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())});
}

void read_matrix(const hdf5::File& file, const std::string& name, Matrix& m) {
  auto array = file.read<float>(name);
  NJ_REQUIRE(array.shape == (std::vector<hsize_t>{static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())}),
             "{}: {}: shape does not match the model ({}x{})", file.path(), name, m.rows(), m.cols());
  std::copy(array.values.begin(), array.values.end(), m.data());
}

}  // namespace

void save_checkpoint(const std::string& path, Model& model, Adam& optimizer, std::uint32_t next_epoch) {
  // Written beside the target and renamed, so a crash never leaves a half-written checkpoint under its name.
  const std::string partial = path + ".partial";
  {
    auto file = hdf5::File::create(partial);
    file.set_attribute("model", describe(model.config()));
    file.set_attribute("next_epoch", static_cast<std::int64_t>(next_epoch));
    file.set_attribute("adam_steps", optimizer.steps());
    file.create_group("/params");
    file.create_group("/adam_m");
    file.create_group("/adam_v");
    const auto& params = optimizer.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      write_matrix(file, "/params/" + params[i]->name, params[i]->value);
      write_matrix(file, "/adam_m/" + params[i]->name, optimizer.first_moments()[i]);
      write_matrix(file, "/adam_v/" + params[i]->name, optimizer.second_moments()[i]);
    }
  }
  std::filesystem::rename(partial, path);
}

std::uint32_t load_checkpoint(const std::string& path, Model& model, Adam& optimizer) {
  const auto file = hdf5::File::open_read(path);
  const std::string stored = file.string_attribute("model");
  NJ_REQUIRE(stored == describe(model.config()), "{}: checkpoint is for '{}', not '{}'", path, stored,
             describe(model.config()));
  const auto& params = optimizer.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    read_matrix(file, "/params/" + params[i]->name, params[i]->value);
    read_matrix(file, "/adam_m/" + params[i]->name, optimizer.first_moments()[i]);
    read_matrix(file, "/adam_v/" + params[i]->name, optimizer.second_moments()[i]);
  }
  optimizer.set_steps(file.int_attribute("adam_steps"));
  return static_cast<std::uint32_t>(file.int_attribute("next_epoch"));
}

}  // namespace nj
