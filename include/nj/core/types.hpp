#pragma once
#include <cstdint>

namespace nj {

// A vertex id local to the graph (or shard) in memory. 32-bit, like Debian's METIS idx_t.
using vid_t = std::int32_t;
// A global vertex id: the id in the original dataset, used for anything random or reported.
using gid_t = std::int64_t;
// An edge offset; graphs may exceed 2^31 edges.
using eid_t = std::int64_t;

}  // namespace nj
