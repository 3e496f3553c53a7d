#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/comm/slice_messages.hpp"

namespace nj {
namespace {

TEST(SliceMessages, ArraysWrittenInPlaceReadBackWhereverTheyLie) {
  Writer writer;
  const std::vector<std::uint8_t> flags{1, 0, 1};  // leaves the next array off an 8-byte boundary
  const std::size_t bytes = Writer::bytes_of_array<std::uint8_t>(3) + Writer::bytes_of_array<std::int64_t>(4) +
                            Writer::bytes_of_array<float>(2);
  writer.reserve(bytes);
  writer.put(flags);
  writer.start_array<std::int64_t>(4);
  writer.add(std::int64_t{-1});
  writer.add_values(std::span<const std::int64_t>(std::vector<std::int64_t>{std::int64_t{1} << 40, 7, 8}));
  writer.start_array<float>(2);
  writer.add(0.5F);
  writer.add(-2.0F);
  const std::vector<std::byte> message = writer.take();
  EXPECT_EQ(message.size(), bytes);

  Reader reader(message);
  EXPECT_EQ(reader.take<std::uint8_t>(), flags);
  const PackedArray<std::int64_t> ids = reader.next<std::int64_t>();
  ASSERT_EQ(ids.size(), 4U);
  EXPECT_EQ(ids[0], -1);
  EXPECT_EQ(ids[1], std::int64_t{1} << 40);
  std::vector<std::int64_t> last(2);
  ids.copy_to(2, 2, last.data());
  EXPECT_EQ(last, (std::vector<std::int64_t>{7, 8}));
  EXPECT_EQ(reader.take<float>(), (std::vector<float>{0.5F, -2.0F}));
  EXPECT_TRUE(reader.done());
}

TEST(SliceMessages, AMessageShorterThanItsCountIsAnError) {
  Writer writer;
  writer.start_array<std::int64_t>(3);
  writer.add(std::int64_t{1});
  const std::vector<std::byte> message = writer.take();
  Reader reader(message);
  EXPECT_ANY_THROW(reader.next<std::int64_t>());
}

TEST(SliceMessages, OneRankAnswersEveryIdOfItsOwnSlice) {
  const auto comm = make_single_process_communicator();
  const Slices slices(10, 1);
  const std::vector<gid_t> ids{0, 3, 9};
  const std::vector<std::int32_t> answers =
      ask_owners<std::int32_t>(ids, slices, *comm, [](gid_t id) { return static_cast<std::int32_t>(100 + id); });
  EXPECT_EQ(answers, (std::vector<std::int32_t>{100, 103, 109}));
}

TEST(Slices, EvenSlicesNameTheRankThatHoldsEachItem) {
  const Slices even(10, 3);
  EXPECT_EQ(even.first(1), 3);
  EXPECT_EQ(even.first(3), 10);
  for (const auto& [item, rank] : std::vector<std::pair<gid_t, int>>{{0, 0}, {2, 0}, {3, 1}, {6, 2}, {9, 2}}) {
    EXPECT_EQ(even.owner(item), rank) << item;
  }
}

}  // namespace
}  // namespace nj
