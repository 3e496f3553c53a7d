// Progress: a bar with an estimate of the time left on a terminal, plain log lines elsewhere, for the commands
// that can run long (generate, convert, partition, train).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "nj/core/progress.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

TEST(ProgressTicks, ReportTheStartAboutEveryPercentAndTheEnd) {
  std::vector<std::int64_t> seen;
  const ProgressCallback record = [&](std::string_view stage, std::int64_t done, std::int64_t total) {
    EXPECT_EQ(stage, "rows");
    EXPECT_EQ(total, 10000);
    seen.push_back(done);
  };
  ProgressTicks ticks(record, "rows", 10000);
  for (std::int64_t i = 0; i < 10000; ++i) ticks.tick(i);
  ticks.finish();
  ASSERT_GE(seen.size(), 100U);
  EXPECT_LE(seen.size(), 102U);
  EXPECT_EQ(seen.front(), 0);
  EXPECT_EQ(seen.back(), 10000);
  for (std::size_t k = 1; k < seen.size(); ++k) EXPECT_GT(seen[k], seen[k - 1]);

  ProgressTicks silent({}, "rows", 10);  // no callback: nothing to call
  silent.tick(5);
  silent.finish();
}

TEST(ProgressCli, LogLinesWhereTheOutputIsNotATerminal) {
  const test::TempDir dir;
  const auto dataset = dir.file("g.h5");
  // Every update logs with a zero interval (10 s by default, which keeps short stages quiet).
  const auto generated =
      test::run_nj("generate --vertices 2000 --edges 20000 -o " + shell_quote(dataset), "NJ_PROGRESS_SECONDS=0");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  for (const char* line : {"generate: edges   0% (0 of 10.0K)", "generate: edges 100% (10.0K of 10.0K)",
                           "generate: features 100% (2000 of 2000)"}) {
    EXPECT_NE(generated.output.find(line), std::string::npos) << line << "\n" << generated.output;
  }
  EXPECT_EQ(generated.output.find('\r'), std::string::npos) << "no bar outside a terminal";

  const auto parted = test::run_nj("partition " + shell_quote(dataset) + " --parts 2 -o " + shell_quote(dir.file("p")),
                                   "NJ_PROGRESS_SECONDS=0");
  ASSERT_EQ(parted.exit_code, 0) << parted.output;
  EXPECT_NE(parted.output.find("partition: shards 100% (2 of 2)"), std::string::npos) << parted.output;

  std::string edges;
  for (int v = 0; v < 5000; ++v) edges += std::to_string(v) + " " + std::to_string((v * 7 + 1) % 5000) + "\n";
  const auto edge_list = dir.file("edges.txt.gz");
  ASSERT_NO_FATAL_FAILURE(test::write_gzip(edge_list, edges));
  const auto converted =
      test::run_nj("convert --format edgelist " + shell_quote(edge_list) + " -o " + shell_quote(dir.file("e.h5")),
                   "NJ_PROGRESS_SECONDS=0");
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  EXPECT_NE(converted.output.find("convert: edges.txt.gz 100%"), std::string::npos) << converted.output;

  // And by default a short stage says nothing.
  const auto quiet = test::run_nj("generate --vertices 2000 --edges 20000 -o " + shell_quote(dir.file("q.h5")));
  EXPECT_EQ(quiet.output.find("generate: edges"), std::string::npos) << quiet.output;
}

TEST(ProgressCli, ABarWithTheTimeLeftOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) is not installed";
  const test::TempDir dir;
  // script(1) runs the command on a pseudo-terminal, as a user's shell would.
  const auto run =
      test::run_nj_in_terminal("generate --vertices 200000 --edges 4000000 -o " + shell_quote(dir.file("g.h5")));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\r\033[Kgenerate: edges ["), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("% ("), std::string::npos) << run.output;
}

}  // namespace
}  // namespace nj
