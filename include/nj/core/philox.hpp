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

  // generate on kLanes counters at once, word w of counter `lane` in c[w][lane]: the rounds vectorise across the
  // counters, and each counter's words equal generate's.
  template <int kLanes>
  NJ_HD static void generate_lanes(std::uint32_t c[4][kLanes], std::uint32_t k0, std::uint32_t k1) {
    for (int round = 0; round < 10; ++round) {
      NJ_SIMD
      for (int lane = 0; lane < kLanes; ++lane) {
        const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0][lane];
        const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2][lane];
        const auto hi0 = static_cast<std::uint32_t>(p0 >> 32U);
        const auto lo0 = static_cast<std::uint32_t>(p0);
        const auto hi1 = static_cast<std::uint32_t>(p1 >> 32U);
        const auto lo1 = static_cast<std::uint32_t>(p1);
        c[0][lane] = hi1 ^ c[1][lane] ^ k0;
        c[1][lane] = lo1;
        c[2][lane] = hi0 ^ c[3][lane] ^ k1;
        c[3][lane] = lo0;
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
  }
};

// A uniform in [0, 1) from 16 random bits: each Philox block yields eight, and 1/65536 is fine resolution for
// dropout probabilities and initial weights. The bits convert as a signed int, which x86 vectorises before
// AVX-512 (an unsigned one it does not).
NJ_HD inline float uniform_from_half(std::uint32_t word, std::uint32_t half) {
  return static_cast<float>(static_cast<std::int32_t>((word >> (16U * half)) & 0xFFFFU)) * (1.0F / 65536.0F);
}

// What the random numbers are for; part of the key so that streams never overlap.
enum class RandomPurpose : std::uint32_t {
  kFeatureDropout = 1,
  kAttentionDropout = 2,
  kWeightInit = 3,
  kGenerator = 4
};

// A keyed stream: (seed, purpose, layer, epoch). A draw is addressed by three 32-bit words and one of the eight
// 16-bit halves of the block they select.
struct RandomStream {
  std::uint64_t seed = 0;
  RandomPurpose purpose = RandomPurpose::kFeatureDropout;
  std::uint32_t layer = 0;
  std::uint32_t epoch = 0;

  NJ_HD std::uint32_t key0() const { return static_cast<std::uint32_t>(seed); }
  NJ_HD std::uint32_t key1() const {
    return static_cast<std::uint32_t>(seed >> 32U) ^ (static_cast<std::uint32_t>(purpose) << 24U) ^ layer;
  }

  // The Philox block of counter (a, b, c, epoch).
  NJ_HD void block(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t out[4]) const {
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = epoch;
    Philox4x32::generate(out, key0(), key1());
  }

  NJ_HD float uniform(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t half) const {
    std::uint32_t words[4];
    block(a, b, c, words);
    return uniform_from_half(words[(half & 7U) >> 1U], half & 1U);
  }

  // Uniform for element (global row, column) of a vertex matrix. Columns go in groups of 128 served by 16
  // blocks: column 128g + o takes half o / 16 of block 16g + o % 16, so that 16 consecutive columns read the
  // same half of 16 consecutive blocks (what a vectorised kernel generates at once).
  NJ_HD float vertex_uniform(std::int64_t gid, std::int64_t column) const {
    const auto g = static_cast<std::uint64_t>(gid);
    const auto group = static_cast<std::uint32_t>(column >> 7);
    const auto offset = static_cast<std::uint32_t>(column & 127);
    return uniform(static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32U), (group << 4U) | (offset & 15U),
                   offset >> 4U);
  }

  // The Philox block of edge (src -> dst), by global ids, that serves heads 8g..8g+7 (g = head / 8): head h
  // takes half h % 8 of it, so that one block covers eight heads.
  NJ_HD void edge_block(std::int64_t src_gid, std::int64_t dst_gid, std::int32_t head, std::uint32_t out[4]) const {
    const auto s = static_cast<std::uint64_t>(src_gid);
    const auto d = static_cast<std::uint64_t>(dst_gid);
    const std::uint32_t high = static_cast<std::uint32_t>(s >> 32U) * Philox4x32::kWeyl0 ^
                               static_cast<std::uint32_t>(d >> 32U) ^ (static_cast<std::uint32_t>(head >> 3) << 20U);
    block(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(d), high, out);
  }

  // edge_block for kLanes edges into one destination at once (source src_gid[lane]), laid out so that the rounds
  // vectorise across the edges; equal, word for word, to edge_block lane by lane.
  template <int kLanes>
  NJ_HD void edge_blocks(const std::int64_t* src_gid, std::int64_t dst_gid, std::int32_t head,
                         std::uint32_t out[4][kLanes]) const {
    const auto d = static_cast<std::uint64_t>(dst_gid);
    const std::uint32_t high = static_cast<std::uint32_t>(d >> 32U) ^ (static_cast<std::uint32_t>(head >> 3) << 20U);
    for (int lane = 0; lane < kLanes; ++lane) {
      const auto s = static_cast<std::uint64_t>(src_gid[lane]);
      out[0][lane] = static_cast<std::uint32_t>(s);
      out[1][lane] = static_cast<std::uint32_t>(d);
      out[2][lane] = static_cast<std::uint32_t>(s >> 32U) * Philox4x32::kWeyl0 ^ high;
      out[3][lane] = epoch;
    }
    Philox4x32::generate_lanes<kLanes>(out, key0(), key1());
  }

  // Uniform for edge (src -> dst) and head, by global ids.
  NJ_HD float edge_uniform(std::int64_t src_gid, std::int64_t dst_gid, std::int32_t head) const {
    std::uint32_t words[4];
    edge_block(src_gid, dst_gid, head, words);
    return uniform_from_half(words[(static_cast<std::uint32_t>(head) & 7U) >> 1U],
                             static_cast<std::uint32_t>(head) & 1U);
  }
};

// The blocks of `count` counters (a, b, c[i], epoch) at once, laid out so that the compiler vectorises the
// rounds across counters; equal, word for word, to RandomStream::block.
template <int kLanes>
inline void philox_blocks(const RandomStream& stream, std::uint32_t a, std::uint32_t b, const std::uint32_t* c,
                          std::uint32_t out[4][kLanes]) {
  for (int lane = 0; lane < kLanes; ++lane) {
    out[0][lane] = a;
    out[1][lane] = b;
    out[2][lane] = c[lane];
    out[3][lane] = stream.epoch;
  }
  Philox4x32::generate_lanes<kLanes>(out, stream.key0(), stream.key1());
}

}  // namespace nj
