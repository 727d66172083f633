// Several sessions in one paged KV cache: a batched step gives each session the logits it
// gets alone, the pool's blocks are taken and given back (a session returns them when it is
// destroyed), a fork shares its prefix blocks, a full pool and every misuse are clean errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "bitnet/devices.h"
#include "bitnet/engine.h"

namespace bitnet {
namespace {

EngineOptions options(int64_t kv_block, int64_t n_ctx, const std::string& device = "cpu") {
  EngineOptions o;
  o.model_path = (std::filesystem::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf").string();
  o.device = device;
  o.strict = true;
  o.n_ctx = n_ctx;
  o.n_threads = 1;
  o.kv_block = kv_block;
  return o;
}

std::unique_ptr<Model> load(int64_t kv_block, int64_t n_ctx, const std::string& device = "cpu") {
  auto m = Model::load(options(kv_block, n_ctx, device));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

Session open(Model& m) {
  auto s = m.open_session();
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : Session();
}

using Batch = std::vector<Model::StepInput>;

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy continuation of `prompt` by an engine of its own (plain cache): n tokens.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int n, const std::string& device) {
  auto loaded = Engine::load(options(0, 256, device));
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  Engine* e = loaded->get();
  std::vector<int32_t> out;
  auto logits = e->eval(prompt, false);
  EXPECT_TRUE(logits.ok());
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(*logits));
    logits = e->eval(std::span<const int32_t>(&out.back(), 1), false);
    EXPECT_TRUE(logits.ok());
  }
  return out;
}

bool runnable(const std::string& device) {
  if (device == "cpu") return true;
  for (const BackendDescription& b : list_devices({})) {
    if (b.backend == device) return b.available;
  }
  return false;
}

class Batches : public testing::TestWithParam<const char*> {};

TEST_P(Batches, SessionsStepTogetherAsTheyRunAlone) {
  const std::string device = GetParam();
  if (!runnable(device)) GTEST_SKIP() << device << " is not available here";
  auto m = load(16, 256, device);
  ASSERT_NE(m, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {
      m->tokenize("Once upon a time", true, false), m->tokenize("The little dog ran to the park and", true, false),
      m->tokenize("Lily", true, false)};
  constexpr int kGen = 20;
  std::vector<Session> sessions;
  for (size_t i = 0; i < prompts.size(); ++i) sessions.push_back(open(*m));
  // Step 1: the first prompt alone; then all three interleaved: prompts 2 and 3 prefill while
  // session 1 decodes (chunked prefill next to decode tokens).
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<int32_t> next(prompts.size(), -1);
  std::vector<bool> started(prompts.size(), false);
  for (int step = 0; step < kGen + 3; ++step) {
    Batch batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (static_cast<int>(got[i].size()) == kGen || (i > 0 && step == 0)) continue;
      // Odd steps take only the largest logit back (Backend::compute_top when every entry
      // does), the others whole rows, or a mix where the first entry differs.
      const int32_t top = step % 2 == 1 || (step % 4 == 2 && batch.empty()) ? 1 : 0;
      if (!started[i]) {
        batch.push_back({&sessions[i], prompts[i], top});
        started[i] = true;
      } else {
        batch.push_back({&sessions[i], std::span<const int32_t>(&next[i], 1), top});
      }
      who.push_back(i);
    }
    if (batch.empty()) break;
    auto logits = m->step(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    ASSERT_EQ(logits->size(), batch.size());
    for (size_t j = 0; j < who.size(); ++j) {
      const Model::StepOutput& out = (*logits)[j];
      if (batch[j].top > 0) {
        ASSERT_EQ(out.top.size(), 1u);
        ASSERT_TRUE(out.logits.empty());
        next[who[j]] = out.top[0].id;
      } else {
        ASSERT_TRUE(out.top.empty());
        next[who[j]] = argmax(out.logits);
      }
      got[who[j]].push_back(next[who[j]]);
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], alone(prompts[i], kGen, device)) << "session " << i;
    EXPECT_EQ(sessions[i].n_past(), static_cast<int64_t>(prompts[i].size() + kGen - 1));
  }
  // Blocks come back when a session closes; a closed one steps no more.
  const int64_t before = m->free_kv_positions();
  sessions[1].close();
  EXPECT_GT(m->free_kv_positions(), before);
  EXPECT_FALSE(sessions[1].is_open());
  EXPECT_TRUE(sessions[1].tokens().empty());
  auto closed = m->step(Batch{{&sessions[1], prompts[0]}});
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Devices, Batches, testing::Values("cpu", "opencl", "vulkan"));

// A step where every entry asks for part of its row (Backend::compute_top: the CPU backend
// selects from its own logits buffer, rows in parallel) gives what the whole rows of the same
// step give through select_top: the 40 largest, ties and order as select_top's, and the `also`
// ids (one out of the vocabulary, skipped) after them; 2 threads, 3 sequences.
TEST(BatchPool, TopOfEachRowEqualsTheWholeRowsSelection) {
  EngineOptions o = options(16, 256);
  o.n_threads = 2;
  auto loaded = Model::load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Model& m = **loaded;
  const std::vector<std::vector<int32_t>> prompts = {{1, 400, 21}, {1, 9, 33, 120}, {1, 77}};
  const std::vector<int32_t> also = {3, 5, 1 << 30};
  std::vector<Session> part, whole;
  for (size_t i = 0; i < prompts.size(); ++i) {
    part.push_back(open(m));
    whole.push_back(open(m));
  }
  Batch by_part, by_row;
  for (size_t i = 0; i < prompts.size(); ++i) {
    by_part.push_back({&part[i], prompts[i], 40, also});
    by_row.push_back({&whole[i], prompts[i], 0});
  }
  auto got = m.step(by_part);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto rows = m.step(by_row);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<float>& row = (*rows)[i].logits;
    std::vector<size_t> order(row.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
    const std::vector<TokenLogit>& top = (*got)[i].top;
    ASSERT_EQ(top.size(), 40u + 2u) << "sequence " << i;
    std::vector<int32_t> ids;
    for (size_t k = 0; k < 40; ++k) ids.push_back(top[k].id);
    std::sort(ids.begin(), ids.end());
    std::vector<int32_t> want(order.begin(), order.begin() + 40);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(ids, want) << "sequence " << i;
    for (size_t k = 0; k < 40; ++k) EXPECT_EQ(top[k].logit, row[static_cast<size_t>(top[k].id)]);
    EXPECT_EQ(top[40].id, 3);
    EXPECT_EQ(top[40].logit, row[3]);
    EXPECT_EQ(top[41].id, 5);
    EXPECT_EQ(top[41].logit, row[5]);
  }
}

TEST(BatchPool, AFullPoolIsACleanError) {
  auto m = load(16, 64);  // 4 blocks
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->free_kv_positions(), 64);
  Session a = open(*m);
  Session b = open(*m);
  const std::vector<int32_t> forty(40, 5);  // 3 blocks
  ASSERT_TRUE(m->step(Batch{{&a, forty}}).ok());
  EXPECT_EQ(m->free_kv_positions(), 16);
  auto full = m->step(Batch{{&b, forty}});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(m->free_kv_positions(), 16);  // nothing taken
  EXPECT_TRUE(b.tokens().empty());
  EXPECT_EQ(a.truncate(10), 10);  // keeps one block
  EXPECT_EQ(m->free_kv_positions(), 48);
  EXPECT_TRUE(m->step(Batch{{&b, forty}}).ok());
  EXPECT_FALSE(m->step(Batch{{&a, forty}, {&a, forty}}).ok());  // twice in one step
}

// Session::eval runs on the paged cache with the logits of an Engine's plain one.
TEST(BatchPool, APagedSessionEqualsThePlainCache) {
  auto plain = Engine::load(options(0, 256));
  auto paged = load(16, 256);
  ASSERT_TRUE(plain.ok() && paged);
  const std::vector<int32_t> prompt = (*plain)->tokenize("Once upon a time there was", true, false);
  Session s = open(*paged);
  auto a = (*plain)->eval(prompt, true);
  auto b = s.eval(prompt, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(s.n_past(), static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(s.truncate(3), 3);
  EXPECT_EQ(s.n_past(), 3);
  // A plain cache holds the engine's own session only, and cannot fork it.
  EXPECT_EQ((*plain)->open_session().status().code(), StatusCode::kUnsupported);
  EXPECT_EQ((*plain)->session().fork(2).status().code(), StatusCode::kUnsupported);
  // An Engine on a paged cache is a Model like any other: more sessions next to its own.
  auto engine = Engine::load(options(16, 256));
  ASSERT_TRUE(engine.ok());
  EXPECT_TRUE((*engine)->open_session().ok());
}

// Past kAttentionPartPositions (512) cached positions the CPU splits a token's attention into
// parts merged afterwards (600 positions: two). The cut depends on the token's positions only, so
// on 2 threads the logits are those of 1 bit for bit, and next to a short session in one step
// they differ only by the float head running as a tile of two tokens. Against the scalar set,
// which attends to all positions in one pass, they agree within 2% of the largest logit: at
// this length stories260K's logits move with the last bits of its attention (its own F16 and
// F32 caches differ by 1-1.7% there, the AVX2 and AVX-512 sets by up to 0.7%), while a part
// dropped or merged with a wrong weight moves them by far more. Each set's parts are held to the
// scalar twin at 1e-5 in kernels_test (AttentionPartsCombineToTheWhole).
TEST(BatchPool, LongContextsSplitAgreeWithTheScalarSetAloneBatchedAndOnMoreThreads) {
  const auto eval_long = [](const std::string& isa, int threads, bool with_short) -> std::vector<float> {
    EngineOptions o = options(16, 1024);
    o.cpu_isa = isa;
    o.n_threads = threads;
    auto m = Model::load(o);
    EXPECT_TRUE(m.ok() || isa == "avx2") << m.status().to_string();  // an Arm64 build has no avx2 set
    if (!m.ok()) return {};
    Session a = open(**m);
    Session b = open(**m);
    std::vector<int32_t> prompt(600);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + (i * 37) % 500);
    EXPECT_TRUE((*m)->step(Batch{{&a, prompt, 0}}).ok());
    const std::vector<int32_t> short_prompt(prompt.begin(), prompt.begin() + 20);
    EXPECT_TRUE((*m)->step(Batch{{&b, short_prompt, 0}}).ok());
    const std::vector<int32_t> next = {42}, other = {7};
    Batch batch = {{&a, next, 0}};
    if (with_short) batch.push_back({&b, other, 0});
    auto out = (*m)->step(batch);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? (*out)[0].logits : std::vector<float>{};
  };
  const std::vector<float> scalar = eval_long("scalar", 1, false);
  ASSERT_FALSE(scalar.empty());
  float max_abs = 0.0f;
  for (float x : scalar) max_abs = std::max(max_abs, std::abs(x));
  const auto expect_near = [&](const std::vector<float>& got, const std::vector<float>& want, float tolerance,
                               const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    float max_diff = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    EXPECT_LT(max_diff, tolerance * max_abs) << what;
  };
  // The CPU's own set, and the AVX2 one where it runs (the default on CPUs without AVX-512).
  for (const std::string isa : {"", "avx2"}) {
    const std::vector<float> alone = eval_long(isa, 1, false);
    if (alone.empty()) continue;
    const std::string set = isa.empty() ? "the default set" : isa;
    expect_near(alone, scalar, 2e-2f, set + " alone, against the scalar set");
    EXPECT_EQ(eval_long(isa, 2, false), alone) << set << " on 2 threads";
    expect_near(eval_long(isa, 1, true), alone, 1e-5f, set + " next to a short session");
    expect_near(eval_long(isa, 2, true), alone, 1e-5f, set + " next to a short session on 2 threads");
  }
}

// fork shares whole blocks of a prefix: the fork continues exactly as a session that
// evaluated the prefix itself, the source may go on or close, the blocks are freed only when
// the last holder lets go, and truncating into a shared block backs off to its start.
TEST(BatchPool, ForkedPrefixesShareBlocks) {
  auto m = load(16, 256);
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt =
      m->tokenize("Once upon a time, there was a little girl named Lily. She loved to play in the park", true, false);
  ASSERT_GT(prompt.size(), 17u);
  auto a = std::make_unique<Session>(open(*m));
  ASSERT_TRUE(m->step(Batch{{a.get(), prompt}}).ok());
  const int64_t free_before = m->free_kv_positions();
  auto forked = a->fork(static_cast<int64_t>(prompt.size()) - 1);
  ASSERT_TRUE(forked.ok());
  Session b = std::move(*forked);
  const size_t shared = (prompt.size() - 1) / 16 * 16;
  EXPECT_EQ(b.tokens().size(), shared);
  EXPECT_EQ(m->free_kv_positions(), free_before);  // nothing copied, nothing taken
  // The fork evaluates the rest of the prompt and continues greedily like a fresh session.
  const std::vector<int32_t> rest(prompt.begin() + static_cast<std::ptrdiff_t>(shared), prompt.end());
  auto logits = m->step(Batch{{&b, rest}});
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  std::vector<int32_t> got = {argmax((*logits)[0].logits)};
  a.reset();  // the source goes away; the shared blocks stay for the fork
  for (int i = 0; i < 9; ++i) {
    logits = m->step(Batch{{&b, std::span<const int32_t>(&got.back(), 1)}});
    ASSERT_TRUE(logits.ok());
    got.push_back(argmax((*logits)[0].logits));
  }
  EXPECT_EQ(got, alone(prompt, 10, "cpu"));
  // Truncating into the first (shared with nobody now) block keeps what was asked.
  EXPECT_EQ(b.truncate(5), 5);
  {
    auto c = b.fork(5);  // less than a block: shares nothing
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->tokens().empty());
    EXPECT_TRUE(c->is_open());
  }
  b = Session();  // moving a closed session in closes b
  EXPECT_EQ(m->free_kv_positions(), 256);
}

TEST(BatchPool, TruncatingIntoASharedBlockBacksOffToItsStart) {
  auto m = load(16, 256);
  ASSERT_NE(m, nullptr);
  Session a = open(*m);
  const std::vector<int32_t> forty(40, 7);
  ASSERT_TRUE(m->step(Batch{{&a, forty}}).ok());
  auto b = a.fork(40);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->tokens().size(), 32u);
  EXPECT_EQ(m->free_kv_positions(), 256 - 48);
  EXPECT_EQ(a.truncate(20), 16);  // block 1 is shared with b: not written into
  EXPECT_EQ(b->truncate(20), 20);  // a gave it up: b's alone now
  ASSERT_TRUE(m->step(Batch{{&a, forty}, {&*b, forty}}).ok());
}

// Destroying sessions gives every block back, whatever order the holders of a shared prefix
// go in; a moved-from session holds nothing.
TEST(BatchPool, DestroyedSessionsReturnTheirBlocks) {
  auto m = load(16, 128);
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> fifty(50, 9);  // 4 blocks
  {
    Session a = open(*m);
    ASSERT_TRUE(a.eval(fifty, false).ok());
    EXPECT_EQ(m->free_kv_positions(), 128 - 64);
    auto b = a.fork(50);  // 3 whole blocks shared
    ASSERT_TRUE(b.ok());
    Session c = std::move(*b);
    EXPECT_FALSE(b->is_open());
    EXPECT_TRUE(b->tokens().empty());
    ASSERT_TRUE(c.eval(std::vector<int32_t>(10, 3), false).ok());  // 48 + 10 tokens: one block more
    EXPECT_EQ(m->free_kv_positions(), 128 - 80);
    a.close();
    EXPECT_EQ(m->free_kv_positions(), 128 - 64);  // a's last block; the shared three stay with c
    a.close();  // closing twice is harmless
  }
  EXPECT_EQ(m->free_kv_positions(), 128);
}

// Misuse is a Status (or an empty answer), never a crash: a closed or default session, one of
// another model, a session that outlives its model, an empty step.
TEST(BatchPool, MisuseIsAnErrorNotACrash) {
  auto m = load(16, 64);
  auto other = load(16, 64);
  ASSERT_TRUE(m && other);
  const std::vector<int32_t> three = {1, 2, 3};
  Session none;
  EXPECT_FALSE(none.is_open());
  EXPECT_EQ(none.eval(three, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.fork(1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.truncate(0), 0);
  EXPECT_EQ(m->step(Batch{{&none, three}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->step(Batch{{nullptr, three}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->step(Batch{}).status().code(), StatusCode::kInvalidArgument);
  Session theirs = open(*other);
  auto wrong = m->step(Batch{{&theirs, three}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("another model"), std::string::npos) << wrong.status().message();
  Session mine = open(*m);
  EXPECT_EQ(mine.eval(std::vector<int32_t>{1, -4}, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mine.eval(std::vector<int32_t>(65, 1), false).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(mine.eval({}, false).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mine.n_past(), 0);
  ASSERT_TRUE(mine.eval(three, false).ok());
  m.reset();  // the model goes first: the session is a handle and answers "closed"
  EXPECT_FALSE(mine.is_open());
  EXPECT_TRUE(mine.tokens().empty());
  EXPECT_EQ(mine.eval(three, false).status().code(), StatusCode::kInvalidArgument);
  mine.close();
}

}  // namespace
}  // namespace bitnet
