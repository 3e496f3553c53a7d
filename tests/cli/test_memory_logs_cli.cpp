// Every stage from the raw files to a trained model logs its peak resident memory, and what it logs is what the kernel
// measured for the process: within 10 % of getrusage's maxrss, which /usr/bin/time reads once the process has ended.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

// Bytes of a size as format_bytes writes it ("214.52M").
double logged_bytes(const std::string& number, char unit) {
  const double value = std::stod(number);
  switch (unit) {
    case 'K': return value * 1024.0;
    case 'M': return value * 1024.0 * 1024.0;
    case 'G': return value * 1024.0 * 1024.0 * 1024.0;
    default: return value;
  }
}

// Runs `nj arguments` under /usr/bin/time and compares the peak nj logs with the one the kernel kept.
void expect_logged_peak_is_measured(const std::string& arguments) {
  const auto result = test::run_nj(arguments, "/usr/bin/time -f 'maxrss %M KiB'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::smatch logged;
  ASSERT_TRUE(std::regex_search(result.output, logged, std::regex(R"(\] peak resident memory ([0-9.]+)([KMG]?))")))
      << arguments << ":\n"
      << result.output;
  std::smatch measured;
  ASSERT_TRUE(std::regex_search(result.output, measured, std::regex(R"(maxrss ([0-9]+) KiB)"))) << result.output;
  const double said = logged_bytes(logged[1].str(), logged[2].str().empty() ? ' ' : logged[2].str()[0]);
  const double kernel = std::stod(measured[1].str()) * 1024.0;
  EXPECT_NEAR(said, kernel, 0.1 * kernel) << arguments;
}

TEST(MemoryLogsCli, EachStageLogsThePeakTheKernelMeasured) {
  const test::TempDir dir;
  const auto dataset = shell_quote(dir.file("graph.h5"));
  expect_logged_peak_is_measured("generate --vertices 200000 --edges 2000000 --features 64 --classes 4 -o " + dataset);
  std::ofstream(dir.file("edges.txt")) << "0 1\n1 2\n2 3\n3 0\n";
  expect_logged_peak_is_measured("convert --format edgelist " + shell_quote(dir.file("edges.txt")) + " -o " +
                                 shell_quote(dir.file("small.h5")));
  expect_logged_peak_is_measured("partition " + dataset + " --parts 2 --method metis -o " +
                                 shell_quote(dir.file("parts")));
  expect_logged_peak_is_measured("train " + dataset + " --epochs 1 --threads 1");
}

}  // namespace
}  // namespace nj
