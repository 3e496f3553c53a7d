// The tables that name each enum's values both ways.
#include <gtest/gtest.h>

#include "nj/core/enum_names.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/model/model.hpp"
#include "nj/partition/partition.hpp"
#include "nj/runtime/resources.hpp"
#include "nj/scheduler/cache_plan.hpp"

namespace nj {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr EnumNames<Colour, 3> kColours{"colour",
                                        {{{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}}}};

TEST(EnumNames, ParseAndPrintComeFromOneTable) {
  for (const auto& [value, name] : kColours.names) {
    EXPECT_STREQ(kColours.name(value), name);
    EXPECT_EQ(kColours.parse(name), value);
  }
  try {
    kColours.parse("mauve");
    ADD_FAILURE() << "an unknown name was parsed";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "unknown colour 'mauve' (expected red, green or blue)");
  }
  EXPECT_THROW(kColours.name(static_cast<Colour>(7)), Error);
}

// Every enum the command line names reads back what it prints.
TEST(EnumNames, EveryNamedEnumRoundTrips) {
  for (const auto policy : {CachePolicy::kStAware, CachePolicy::kLru, CachePolicy::kFifo, CachePolicy::kDegree,
                            CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone}) {
    EXPECT_EQ(parse_cache_policy(to_string(policy)), policy);
  }
  for (const auto mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
    EXPECT_EQ(parse_execution_mode(to_string(mode)), mode);
  }
  for (const auto kind : {ModelKind::kGcn, ModelKind::kGat}) EXPECT_EQ(parse_model_kind(to_string(kind)), kind);
  for (const auto act : {Activation::kRelu, Activation::kElu}) EXPECT_EQ(parse_activation(to_string(act)), act);
  EXPECT_STREQ(to_string(Activation::kNone), "none");
  EXPECT_THROW(parse_activation("none"), InputError) << "the output layer's, never asked for";
  for (const auto order : {VertexOrder::kCommunity, VertexOrder::kInput}) {
    EXPECT_EQ(parse_vertex_order(to_string(order)), order);
  }
  for (const auto policy : {SelfLoopPolicy::kKept, SelfLoopPolicy::kRemoved, SelfLoopPolicy::kAdded}) {
    EXPECT_EQ(parse_self_loop_policy(to_string(policy)), policy);
  }
  for (const auto method : {PartitionMethod::kMetis, PartitionMethod::kRandom, PartitionMethod::kContiguous}) {
    EXPECT_EQ(parse_partition_method(to_string(method)), method);
  }
  for (const auto kind : {DeviceKind::kAuto, DeviceKind::kCpu, DeviceKind::kCuda}) {
    EXPECT_EQ(parse_device_kind(to_string(kind)), kind);
  }
}

}  // namespace
}  // namespace nj
