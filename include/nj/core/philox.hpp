#pragma once
// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator. Every random number is a pure function of
// (seed, stream, counter), so a dropout mask depends only on (seed, epoch, layer, global vertex id, column)
// and never on thread count, chunking or the number of ranks.
#include <array>
#include <cstdint>

#include "nj/core/hd.hpp"

namespace nj {

struct Philox4x32 {
  static constexpr std::uint32_t kMul0 = 0xD2511F53U;
  static constexpr std::uint32_t kMul1 = 0xCD9E8D57U;
  static constexpr std::uint32_t kWeyl0 = 0x9E3779B9U;
  static constexpr std::uint32_t kWeyl1 = 0xBB67AE85U;

  NJ_HD static void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
    const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(product >> 32U);
    lo = static_cast<std::uint32_t>(product);
  }

  // Ten rounds on counter c with key k; returns four independent 32-bit words in c.
  NJ_HD static void generate(std::uint32_t c[4], std::uint32_t k0, std::uint32_t k1) {
    for (int round = 0; round < 10; ++round) {
      std::uint32_t hi0 = 0;
      std::uint32_t lo0 = 0;
      std::uint32_t hi1 = 0;
      std::uint32_t lo1 = 0;
      mulhilo(kMul0, c[0], hi0, lo0);
      mulhilo(kMul1, c[2], hi1, lo1);
      const std::uint32_t next[4] = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
      c[0] = next[0];
      c[1] = next[1];
      c[2] = next[2];
      c[3] = next[3];
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
  }
};

// Maps a 32-bit word to a float uniform in [0, 1) with 24 bits of precision.
NJ_HD inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8U) * (1.0F / 16777216.0F);
}

// What the random numbers are for; part of the key so that streams never overlap.
enum class RandomPurpose : std::uint32_t {
  kFeatureDropout = 1,
  kAttentionDropout = 2,
  kWeightInit = 3,
  kGenerator = 4
};

// A keyed stream: (seed, purpose, layer, epoch). Draws are addressed by up to three 32-bit words plus a lane.
struct RandomStream {
  std::uint64_t seed = 0;
  RandomPurpose purpose = RandomPurpose::kFeatureDropout;
  std::uint32_t layer = 0;
  std::uint32_t epoch = 0;

  // The four uniforms of counter (a, b, c): one Philox call serves four lanes.
  NJ_HD void uniform4(std::uint32_t a, std::uint32_t b, std::uint32_t c, float out[4]) const {
    std::uint32_t counter[4] = {a, b, c, epoch};
    const auto k0 = static_cast<std::uint32_t>(seed);
    const auto k1 = static_cast<std::uint32_t>(seed >> 32U) ^ (static_cast<std::uint32_t>(purpose) << 24U) ^ layer;
    Philox4x32::generate(counter, k0, k1);
    for (int i = 0; i < 4; ++i) out[i] = uniform_from_bits(counter[i]);
  }

  NJ_HD float uniform(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t lane) const {
    float values[4];
    uniform4(a, b, c, values);
    return values[lane & 3U];
  }

  // Uniforms for columns 4q .. 4q+3 of a vertex matrix's row `gid`.
  NJ_HD void vertex_uniform4(std::int64_t gid, std::int64_t quad, float out[4]) const {
    const auto g = static_cast<std::uint64_t>(gid);
    uniform4(static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32U), static_cast<std::uint32_t>(quad),
             out);
  }

  // Uniform for element (global row, column) of a vertex matrix.
  NJ_HD float vertex_uniform(std::int64_t gid, std::int64_t column) const {
    float values[4];
    vertex_uniform4(gid, column >> 2, values);
    return values[column & 3];
  }

  // Uniform for edge (src -> dst) and head, by global ids.
  NJ_HD float edge_uniform(std::int64_t src_gid, std::int64_t dst_gid, std::int32_t head) const {
    const auto s = static_cast<std::uint64_t>(src_gid);
    const auto d = static_cast<std::uint64_t>(dst_gid);
    const std::uint32_t high = static_cast<std::uint32_t>(s >> 32U) * Philox4x32::kWeyl0 ^
                               static_cast<std::uint32_t>(d >> 32U) ^ (static_cast<std::uint32_t>(head >> 2) << 20U);
    return uniform(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(d), high,
                   static_cast<std::uint32_t>(head & 3));
  }
};

}  // namespace nj
