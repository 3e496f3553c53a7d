#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>
#include <string>

#include "nj/core/side_by_side.hpp"

namespace nj {
namespace {

TEST(SideBySide, BothPiecesRun) {
  int first = 0;
  int second = 0;
  side_by_side([&] { first = 1; }, [&] { second = 2; });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
}

// --threads 1 (OpenMP's thread count) holds for it too: both pieces then run on the calling thread.
TEST(SideBySide, OneThreadRunsBothInTurn) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  int team[2] = {0, 0};
  side_by_side([&] { team[0] = omp_get_num_threads(); }, [&] { team[1] = omp_get_num_threads(); });
  omp_set_num_threads(threads);
  EXPECT_EQ(team[0], 1);
  EXPECT_EQ(team[1], 1);
}

TEST(SideBySide, TheFirstErrorWinsAsInOrder) {
  try {
    side_by_side([] { throw std::runtime_error("first"); }, [] { throw std::logic_error("second"); });
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "first");
  }
}

TEST(SideBySide, AnErrorOfTheSecondComesAfterTheFirstFinished) {
  bool first_done = false;
  try {
    side_by_side([&] { first_done = true; }, [] { throw std::logic_error("second"); });
    FAIL() << "expected an error";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), "second");
  }
  EXPECT_TRUE(first_done);
}

}  // namespace
}  // namespace nj
