#include <gtest/gtest.h>

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
