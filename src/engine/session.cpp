// Sessions: handles on the sequences of a Model's KV cache (EngineCore::seqs), and the
// batched step over several of them.
#include <fmt/format.h>

#include "bitnet/model.h"
#include "engine/engine_impl.h"

namespace bitnet {

namespace {

Status closed_session() { return invalid_argument("the session is closed (or its model is gone)"); }

}  // namespace

Session::Session(Session&& other) noexcept : core_(std::move(other.core_)), seq_(other.seq_) { other.seq_ = -1; }

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    close();
    core_ = std::move(other.core_);
    seq_ = other.seq_;
    other.seq_ = -1;
  }
  return *this;
}

Session::~Session() { close(); }

std::shared_ptr<EngineCore> Session::open_core() const { return seq_ < 0 ? nullptr : core_.lock(); }

bool Session::is_open() const { return open_core() != nullptr; }

void Session::close() {
  if (const std::shared_ptr<EngineCore> core = open_core()) core->close_sequence(seq_);
  core_.reset();
  seq_ = -1;
}

std::span<const int32_t> Session::tokens() const {
  const std::shared_ptr<EngineCore> core = open_core();
  if (core == nullptr) return {};
  return core->seqs.at(seq_).tokens;  // the model (not this temporary owner) keeps it alive
}

Result<std::vector<float>> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  const std::shared_ptr<EngineCore> core = open_core();
  if (core == nullptr) return closed_session();
  const EngineCore::SeqTokens in{seq_, tokens};
  BITNET_RETURN_IF_ERROR(core->check_step(std::span(&in, 1)));
  std::vector<float> logits;
  BITNET_RETURN_IF_ERROR(core->run(seq_, tokens, all_logits, logits));
  return logits;
}

int64_t Session::truncate(int64_t n) {
  const std::shared_ptr<EngineCore> core = open_core();
  return core == nullptr ? 0 : core->truncate(seq_, n);
}

Result<Session> Session::fork(int64_t n) const {
  const std::shared_ptr<EngineCore> core = open_core();
  if (core == nullptr) return closed_session();
  BITNET_ASSIGN_OR_RETURN(const int32_t seq, core->fork_sequence(seq_, n));
  return Session(core, seq);
}

Result<Session> Model::open_session() {
  BITNET_ASSIGN_OR_RETURN(const int32_t seq, core_->open_sequence());
  return Session(core_, seq);
}

Result<std::vector<Model::StepOutput>> Model::step(std::span<const StepInput> batch) {
  std::vector<EngineCore::SeqTokens> seqs;
  seqs.reserve(batch.size());
  size_t n_top = 0;
  for (const StepInput& in : batch) {
    if (in.session == nullptr || !in.session->is_open()) return closed_session();
    if (in.session->core_.lock() != core_) return invalid_argument("the session belongs to another model");
    if (in.top < 0) return invalid_argument("a negative top count");
    seqs.push_back({in.session->seq_, in.tokens});
    n_top += in.top > 0 ? 1 : 0;
  }
  std::vector<StepOutput> out(batch.size());
  std::vector<hal::TopRequest> req(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) req[i] = {batch[i].top, {batch[i].also.begin(), batch[i].also.end()}};
  if (n_top == batch.size() && !batch.empty()) {
    // Every entry wants part of its row: the backend selects it.
    std::vector<std::vector<hal::TokenLogit>> top;
    BITNET_RETURN_IF_ERROR(core_->step_top(seqs, req, top));
    for (size_t i = 0; i < batch.size(); ++i) out[i].top = std::move(top[i]);
    return out;
  }
  std::vector<float> flat;
  BITNET_RETURN_IF_ERROR(core_->step(seqs, flat));
  const auto n_vocab = static_cast<size_t>(core_->model.config().n_vocab);
  for (size_t i = 0; i < batch.size(); ++i) {
    const std::span<const float> row = std::span<const float>(flat).subspan(i * n_vocab, n_vocab);
    if (batch[i].top > 0) {
      hal::select_top(row, req[i], out[i].top);
    } else {
      out[i].logits.assign(row.begin(), row.end());
    }
  }
  return out;
}

}  // namespace bitnet
