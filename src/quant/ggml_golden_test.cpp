// Bit-exactness against ggml itself: testdata/ggml_digests.c ran ggml's own quantize_row_*_ref,
// dequantize_row_* and generic ggml_vec_dot_* (llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b,
// x86-64 baseline build, no FMA) on a fixed pseudo-random input and printed SHA-256 digests of
// the results. These tests rebuild the same inputs and demand the same digests, so a single
// differing bit in any output fails them.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "quant/quant.h"

namespace bitnet::quant {
namespace {

constexpr int64_t kN = 49152;  // three segments of 16384: 192 K super-blocks

// The generator of ggml_digests.c: xorshift64*, and floats (int32) r * 2^-31 in [-1, 1).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint32_t next_u32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1DULL) >> 32);
  }
  float uniform() {
    return static_cast<float>(static_cast<int32_t>(next_u32())) * (1.0f / 2147483648.0f);
  }

 private:
  uint64_t state_;
};

// kN/3 uniform, kN/3 heavy-tailed (4u^3), then 32-blocks cycling through all zero, constant,
// tiny (1e-8), one outlier of 50 among 0.01s, non-negative, and uniform.
std::vector<float> golden_input() {
  Rng rng(0x9E3779B97F4A7C15ULL);
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN / 3; ++i) x[i] = rng.uniform();
  for (int64_t i = kN / 3; i < 2 * kN / 3; ++i) {
    const float u = rng.uniform();
    x[i] = u * u * u * 4.0f;
  }
  for (int64_t i = 2 * kN / 3; i < kN; ++i) {
    const int64_t block = (i - 2 * kN / 3) / 32;
    const float u = rng.uniform();
    switch (block % 7) {
      case 0: x[i] = 0.0f; break;
      case 1: x[i] = 0.37f; break;
      case 2: x[i] = u * 1e-8f; break;
      case 3: x[i] = i % 32 == 5 ? 50.0f : u * 0.01f; break;
      case 4: x[i] = u < 0 ? -u : u; break;
      default: x[i] = u; break;
    }
  }
  return x;
}

// The large input of ggml_digests.c for the K quantizers' searches: 65536-element runs of sums
// of three uniforms, products of three times 8, and uniforms around 30 (no a * b + c to fuse).
std::vector<float> large_input() {
  Rng rng(0x2545F4914F6CDD1DULL);
  std::vector<float> x(int64_t{1} << 20);
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = rng.uniform();
    const float b = rng.uniform();
    const float c = rng.uniform();
    switch ((i / 65536) % 3) {
      case 0: x[i] = a + b + c; break;
      case 1: x[i] = a * b * c * 8.0f; break;
      default: x[i] = a + 30.0f; break;
    }
  }
  return x;
}

// Random block bytes whose fp16 fields (byte offsets `f16`) hold finite halves in [0.125, 8),
// with a random sign for the fields in signed_mask; float_d: a float d in [2^-7, 2^-5) at 0.
struct RandomLayout {
  int64_t block_elems;
  int64_t block_bytes;
  std::vector<int> f16;
  unsigned signed_mask = 0;
  bool float_d = false;
};

std::vector<uint8_t> random_blocks(Rng& rng, const RandomLayout& l) {
  const int64_t n_blocks = kN / l.block_elems;
  std::vector<uint8_t> p(static_cast<size_t>(n_blocks * l.block_bytes));
  for (uint8_t& b : p) b = static_cast<uint8_t>(rng.next_u32() & 0xff);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = p.data() + b * l.block_bytes;
    for (size_t k = 0; k < l.f16.size(); ++k) {
      auto h = static_cast<uint16_t>(0x3000 + rng.next_u32() % 0x1800);
      if (l.signed_mask & (1u << k)) h = static_cast<uint16_t>(h | (rng.next_u32() & 0x8000));
      std::memcpy(blk + l.f16[k], &h, 2);
    }
    if (l.float_d) {
      const uint32_t bits = 0x3c000000u + rng.next_u32() % 0x01000000u;
      std::memcpy(blk, &bits, 4);
    }
  }
  return p;
}

template <typename T>
std::string digest(const std::vector<T>& v) {
  return sha256_hex({reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)});
}

std::vector<float> dequantized(GgmlType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> y(kN);
  const Status s = dequantize(type, bytes, kN, y.data());
  EXPECT_TRUE(s.ok()) << s.to_string();
  return y;
}

TEST(GgmlGolden, InputMatchesGenerator) {
  EXPECT_EQ(digest(golden_input()),
            "fa2a37eaa22e04f69266e0f2eea81b40e6bf84ceaf855294791a229cca2354b5");
}

// quantize_row_*_ref bytes, then dequantize_row_* of those bytes.
TEST(GgmlGolden, QuantizeAndRoundTrip) {
  struct Case {
    GgmlType type;
    const char* quantized;
    const char* round_trip;  // nullptr: ggml has no dequantizer (Q8_1)
  };
  const Case cases[] = {
      {GgmlType::kQ4_0, "97c80ed3658a84d8b5b45f71badd8afcf50939b195d6bcf0637235d7647911ff",
       "763f6c08c362afd1afbb5f51109a5aadc78dd9d74b6bde414bd876bef9fe6df0"},
      {GgmlType::kQ4_1, "538a2abac440cf8ebb62d8a9767b1a203c1b7b850b359b655cdc3ff7299ba4e4",
       "808d393b09903850494fe3527318772c92d1c74e37ff106e9bb0772b9a93c355"},
      {GgmlType::kQ5_0, "4a31d9d5173be4620f59765b1058de39e84db4f5fec24b0305578dca8b611bbf",
       "1337a34968d31f849cc6bda284be1a56edf101baf215ff7441b56bbeac2ce869"},
      {GgmlType::kQ5_1, "8755e1c276108085559e5b6437e4284134ba736575e2d1a04c42175237867d93",
       "5576a522fc547805acd3c34dfe41fa0372ed3e81787b17a3814f227eebbb3191"},
      {GgmlType::kQ8_0, "bfa184c2a4910e5a7ac61dc1208d4ef740e150edf00ba6ccdc60b7e34a835bac",
       "6418a92fb1317729ab441aa98920880fd0d8a5e1bf21523a8b84e084bc6c7bea"},
      {GgmlType::kQ8_1, "c7fbe24146e1d5eb40961a28d92eed7d6bcc60809097b1709ccb7b5cdb05380b",
       nullptr},
      {GgmlType::kQ4_K, "0d31d2f96ba4a6cc96185018fba15ceb8991988a0b516ce0b1f5105b074f8ee9",
       "909e746857c37d5c3e582838f4c6c1c7000e8431b937e0a758d274e24694b159"},
      {GgmlType::kQ5_K, "4b6a290087311773f355d4a67efaa4029b093ddd9248763dc0e12c664b2d46aa",
       "9d15c03dc95b3632b1ec6a26dd340cc00511f1c965c53855675eca9411ce7585"},
      {GgmlType::kQ6_K, "f07834b6c252ba10cbeec78db02cdaaac300ef154d45327c772c1291e022d64d",
       "f5cb2d795dd9e922196295cc6f010fc273d37b11bef3c1dea7e79320c4b6cbfa"},
      {GgmlType::kQ8_K, "a1b2d0acd2f1ac06c431d97ff5522967d95439644f98f926978aeae78f0cbba2",
       "9b7f086e64c8ced3d2286d67a0757584efe38a7e650fa9cad9d5a419bed5d7e9"},
      {GgmlType::kQ2_K, "7fd6723a686725e28adfad44777b612fc838657901c34af609dcbf683e36df87",
       "57119ad03fb1f70b6f871f6c4122afde5d740a9d69be059b1f015811fdbf2e47"},
      {GgmlType::kQ3_K, "b3b387c5cfe5aae60bbe9bf99a15cf2dab6f782b2beb079cc9d8b75f6b4e337d",
       "b35e2471c2755990a403165066206ad46f85739acc616b2a48da1fb4711f3f65"},
      // The input's all-zero blocks follow non-zero ones: ggml repeats the previous codes there.
      {GgmlType::kIQ4_NL, "39e25d7647690a1770cd4ff316c80d05426b2f5c25dc1aa047727189de9f2074",
       "359d2d1a11dcba6407eae327ff221ae1829a9895feb7f80d366d1de439fa2098"},
      {GgmlType::kIQ4_XS, "2c6c814e1ef319e307a20f07f65271d3366ac1a7bc39b2de7c611548a5a89b1f",
       "b4fc65673879879837e5d0336397addac7af30857a0906ddbf79b961d00ba516"},
  };
  const std::vector<float> x = golden_input();
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    auto q = quantize(c.type, x.data(), 1, kN);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    EXPECT_EQ(digest(*q), c.quantized);
    if (c.round_trip != nullptr) {
      EXPECT_EQ(digest(dequantized(c.type, *q)), c.round_trip);
    }
  }
}

// The K and IQ4 quantizers' scale searches on 4096 super-blocks: a wrong association in a
// weighted sum or a missing search step changes only a few blocks in a thousand (checked by
// mutation for Q4_K..Q6_K), too few for the small input to show.
TEST(GgmlGolden, KQuantizersOnALargeInput) {
  const std::vector<float> x = large_input();
  EXPECT_EQ(digest(x), "252cfd7972e1997d2766bf6cfd5ce75aff24cb3bc43bb62d8c2e126aa5ef3689");
  const int64_t n = static_cast<int64_t>(x.size());
  struct Case {
    GgmlType type;
    const char* want;
  };
  const Case cases[] = {
      {GgmlType::kQ4_K, "5bee0224b0121b2d158d56fac75ec2a6299307d0962b67c0bc17963136287bb8"},
      {GgmlType::kQ5_K, "a0b42f96296723ef803070c963f032e15f8007356fcdcc97dbc6e0f52657f310"},
      {GgmlType::kQ6_K, "1dc0d20858f28028e3a1accdd67aa4efb8233eab2c352f892ae6e198098d132e"},
      {GgmlType::kQ2_K, "9d2f11daedef7755aea290ea0adb07af4dfb1737bf27932de544b66986d7bc97"},
      {GgmlType::kQ3_K, "4d4acc35264c774822370748715bfa9990d44d79fcf9ef462a7cfa4458271216"},
      {GgmlType::kIQ4_NL, "84489613eb1c8d415fb569493b584b357f921ad3aabe74feb89c7deec9c8a198"},
      {GgmlType::kIQ4_XS, "ee82a1845331c844f36de9c950a0c7596a13ca131255d264c872c2e3b54807ca"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    auto q = quantize(c.type, x.data(), n / 256, 256);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    EXPECT_EQ(digest(*q), c.want);
  }
}

// dequantize_row_* of random bytes: every bit pattern of codes, scales and high bits.
TEST(GgmlGolden, DequantizeRandomBlocks) {
  struct Case {
    GgmlType type;
    RandomLayout layout;
    const char* want;
  };
  const Case cases[] = {
      {GgmlType::kQ4_0, {32, 18, {0}},
       "f2efb2f9b3ffd1f754651588e224553c0e4d1dfedc6e9679b77fb5b851e37bcf"},
      {GgmlType::kQ4_1, {32, 20, {0, 2}, 2},
       "b54e920b618989ab33bd870c488928d096ed99de3abb7807a4191247999cb8da"},
      {GgmlType::kQ5_0, {32, 22, {0}},
       "8ee426866c837920750b0b9cd32a5bf73fd16dfe086ccec7ab345f943487b955"},
      {GgmlType::kQ5_1, {32, 24, {0, 2}, 2},
       "2414db145644535e610cad77ecc10457eea129fb6e7fca5b65d50b8c5b7049af"},
      {GgmlType::kQ8_0, {32, 34, {0}},
       "c27fda0d82854923e5d9a04456b0e5663eb8d66f3b50ffcea8c69c6d7e755911"},
      {GgmlType::kQ2_K, {256, 84, {80, 82}},
       "31935ca1349483cf0e629cd1d0c50385888f244eebc462c6d3d48fa78312a3b1"},
      {GgmlType::kQ3_K, {256, 110, {108}},
       "993f84340948893806b2c65c10031187ad73fab2f9474113b2190bdda61e11a5"},
      {GgmlType::kQ4_K, {256, 144, {0, 2}},
       "c52a4ed1bd5adafa4a3c31780b52a287a7d5c9f55781c2a93dfb3579f3532602"},
      {GgmlType::kQ5_K, {256, 176, {0, 2}},
       "d8f5d76046fc7915e5fd49c5bdbe38b1b0b596987185b0a17ee3f5705b0ebb0f"},
      {GgmlType::kQ6_K, {256, 210, {208}},
       "5935f4ab439ac1f1705e2aeb922e875bd4edc9fe239276210e707b35a218988b"},
      {GgmlType::kQ8_K, {256, 292, {}, 0, true},
       "ab9a8ff3eeefb2a9919e820b55972d7b153fa7c49f65e9502565acef68774f3d"},
      {GgmlType::kIQ4_NL, {32, 18, {0}},
       "784f1e0396ddf12cd6f5cad619553d3f8cbd82e82e2c31e89d7d9d768e6e4437"},
      {GgmlType::kIQ4_XS, {256, 136, {0}},
       "d9727a7524d9f5591964998e740b6ca02dcf2c3049525c8626ad6ae1ff7f31ab"},
  };
  Rng rng(0xD1B54A32D192ED03ULL);  // one stream through all cases, in this order
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    const std::vector<uint8_t> bytes = random_blocks(rng, c.layout);
    EXPECT_EQ(digest(dequantized(c.type, bytes)), c.want);
  }
}

// The generic ggml_vec_dot_*: random weights against activations quantized from the input;
// one result per 256-element row (digest of their bits) and one over all kN elements.
TEST(GgmlGolden, DotProducts) {
  struct Case {
    GgmlType type;
    RandomLayout layout;
    uint32_t all_bits;
    const char* rows;
  };
  const Case cases[] = {
      {GgmlType::kQ4_0, {32, 18, {0}}, 0xc5ed2e23,
       "4524a4ef8d4827aa8467ba57314cbfeb9243c3edb2177d4bc7dcb3aeb1f9def8"},
      {GgmlType::kQ4_1, {32, 20, {0, 2}, 2}, 0x47bf43fc,
       "51c6ac593311f8574e897750b871a6fc79af38b0e125059729616fbb6c5f3925"},
      {GgmlType::kQ8_0, {32, 34, {0}}, 0xc6cbaf91,
       "a57cee707a1179f57bfdf0da116576c65bdc2005efb7d658f54c1b346a6855c0"},
      {GgmlType::kQ4_K, {256, 144, {0, 2}}, 0x4a278993,
       "19d6680f86a4eb8be99f90795a1ec1046bb6233b57027903d92ae15f113b27dc"},
      {GgmlType::kQ5_K, {256, 176, {0, 2}}, 0x4a4f7ab2,
       "83f33ec9c6be7e718060fde92c9b05da5d6ed766d56375146489589240c471fe"},
      {GgmlType::kQ6_K, {256, 210, {208}}, 0xc9800910,
       "a52d39776bd1ba3c8cbb195354947763f5c6ea95c06e2f5d22fc6fca60a35441"},
      // Added later, after the cases above in the same stream.
      {GgmlType::kQ5_0, {32, 22, {0}}, 0xc68adf88,
       "8d424dabb8f0012de18823931a1d7e377528cbb4da2884fc0d3c036d37a62bfa"},
      {GgmlType::kQ5_1, {32, 24, {0, 2}, 2}, 0x4823c2e9,
       "7f839aacedbe1bd2450caa70b549de03f8225d3f4b4a5324efebda5f620af5a3"},
      {GgmlType::kQ2_K, {256, 84, {80, 82}}, 0x4703ab85,
       "2b39955c8e3c1c248e9cba07b8e2b5be7c7d2499f7384d66c1f7499c38abe469"},
      {GgmlType::kQ3_K, {256, 110, {108}}, 0xc7a4dc93,
       "b9d9528ba046ff51131fe7a5874987e471e3c2f0e5811e88977187541077166f"},
      {GgmlType::kIQ4_NL, {32, 18, {0}}, 0xc75edc0c,
       "ede851180430c5fb4749c094c9408d66f56ed1ded345b2bb5ebc69bb0290903e"},
      {GgmlType::kIQ4_XS, {256, 136, {0}}, 0xc9cc97ec,
       "f1a81eebc0ffd094649de612c53cc6bb1dac98fbcbfd7a6abb3bf76b06434910"},
  };
  const std::vector<float> x = golden_input();
  Rng rng(0x94D049BB133111EBULL);
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    const std::vector<uint8_t> w = random_blocks(rng, c.layout);
    const GgmlType a_type = *vec_dot_type(c.type);
    auto a = quantize(a_type, x.data(), 1, kN);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    const uint64_t w_row = *ggml_tensor_n_bytes(c.type, 256);
    const uint64_t a_row = *ggml_tensor_n_bytes(a_type, 256);
    std::vector<float> rows;
    for (int64_t r = 0; r < kN / 256; ++r) {
      auto d = vec_dot(c.type, std::span(w).subspan(r * w_row, w_row),
                       std::span(*a).subspan(r * a_row, a_row), 256);
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      rows.push_back(*d);
    }
    EXPECT_EQ(digest(rows), c.rows);
    auto all = vec_dot(c.type, w, *a, kN);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(std::bit_cast<uint32_t>(*all), c.all_bits) << *all;
  }
}

}  // namespace
}  // namespace bitnet::quant
