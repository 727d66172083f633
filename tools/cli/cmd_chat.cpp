// `bitnet chat`: a terminal chat on the model's chat template. Each line read from stdin is a
// user turn; the whole conversation is rendered again and only the tokens after the prefix
// already in the KV cache are evaluated. /reset forgets the conversation, /exit or EOF ends.
// Ctrl-C during a reply stops the reply; Ctrl-C at the prompt ends the program.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bitnet/chat.h"
#include "commands.h"

namespace bitnet::cli {

namespace {

struct ChatFlags {
  ModelFlags model;
  std::string chat_template;       // a built-in name; empty: the model's
  std::string chat_template_file;  // Jinja text from a file
  std::string system;
  int64_t n_predict = -1;  // per reply; -1: until end of generation or a full context
  SamplingParams sampling;
  int64_t seed = -1;
};

// Set by SIGINT; the handler is installed without SA_RESTART so that a blocked read returns.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

void install_sigint_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

enum class ReadResult { kLine, kEof, kInterrupted };

ReadResult read_line(std::string& line) {
  line.clear();
  while (true) {
    const int c = std::fgetc(stdin);
    if (c == EOF) {
      if (g_interrupted) return ReadResult::kInterrupted;
      return line.empty() ? ReadResult::kEof : ReadResult::kLine;
    }
    if (c == '\n') return ReadResult::kLine;
    line += static_cast<char>(c);
  }
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

Result<chat::ChatTemplate> load_template(const ChatFlags& f, const Engine& engine) {
  if (!f.chat_template_file.empty()) {
    std::ifstream in(f.chat_template_file, std::ios::binary);
    if (!in) return io_error(f.chat_template_file + ": cannot open");
    std::stringstream text;
    text << in.rdbuf();
    auto t = chat::ChatTemplate::parse(text.str());
    if (!t.ok()) return t.status().with_context(f.chat_template_file);
    return t;
  }
  return chat::ChatTemplate::for_model(engine.chat_template(), f.chat_template, engine.model().architecture);
}

double per_second(int64_t n, double seconds) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; }

int chat_loop(const ChatFlags& f) {
  int code = 0;
  std::unique_ptr<Engine> engine = load_engine(f.model, code);
  if (!engine) return code;
  auto tmpl = load_template(f, *engine);
  if (!tmpl.ok()) return fail(tmpl.status());
  SamplingParams sampling = f.sampling;
  sampling.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : std::random_device{}();
  const chat::RenderOptions render_options{true, engine->bos_token(), engine->eos_token()};
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  std::fprintf(stderr, "chat template: %s | seed: %llu | /reset forgets the conversation, /exit or Ctrl-D ends%s\n",
               tmpl->name().c_str(), static_cast<unsigned long long>(sampling.seed),
               interactive ? ", Ctrl-C stops a reply" : "");
  install_sigint_handler();

  std::vector<chat::Message> history;
  const auto start_conversation = [&] {
    history.clear();
    if (!f.system.empty()) history.push_back({"system", f.system});
  };
  start_conversation();
  const int64_t n_predict = f.n_predict < 0 ? std::numeric_limits<int64_t>::max() : f.n_predict;
  GenerateStats total;  // all turns, for --receipt
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    const ReadResult r = read_line(line);
    if (r == ReadResult::kInterrupted) {
      if (interactive) std::fputc('\n', stdout);
      break;
    }
    if (r == ReadResult::kEof) break;
    const std::string text = trim(line);
    if (text.empty()) continue;
    if (text == "/exit" || text == "/quit") break;
    if (text == "/reset") {
      start_conversation();
      engine->reset();
      std::fprintf(stderr, "(conversation reset)\n");
      continue;
    }

    history.push_back({"user", text});
    auto prompt = tmpl->render(history, render_options);
    if (!prompt.ok()) {
      history.pop_back();
      std::fprintf(stderr, "error: %s\n", prompt.status().to_string().c_str());
      continue;
    }
    // A template that writes BOS itself (Llama 3) must not get a second one from the tokenizer.
    const std::string& bos = render_options.bos_token;
    const bool add_bos = engine->add_bos_default() && (bos.empty() || !prompt->starts_with(bos));
    const std::vector<int32_t> tokens = engine->tokenize(*prompt, add_bos, /*parse_special=*/true);
    if (static_cast<int64_t>(tokens.size()) >= engine->n_ctx()) {
      history.pop_back();
      std::fprintf(stderr, "error: the conversation has %zu tokens, the context holds %lld: /reset, or raise -c\n",
                   tokens.size(), static_cast<long long>(engine->n_ctx()));
      continue;
    }

    g_interrupted = 0;
    std::string reply;
    GenerateStats stats;
    const Status s = engine->generate_tokens(tokens, sampling, n_predict,
                                             [&](int32_t, std::string_view piece) {
                                               if (g_interrupted) return false;
                                               // "[/INST]" and the like are followed by a space
                                               // the reply need not show.
                                               if (reply.empty()) {
                                                 while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
                                               }
                                               reply += piece;
                                               std::fwrite(piece.data(), 1, piece.size(), stdout);
                                               std::fflush(stdout);
                                               return true;
                                             },
                                             &stats);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!s.ok()) return fail(s);
    g_interrupted = 0;
    history.push_back({"assistant", trim(reply)});
    total.n_prompt += stats.n_prompt;
    total.n_generated += stats.n_generated;
    total.n_reused += stats.n_reused;
    total.prompt_seconds += stats.prompt_seconds;
    total.generate_seconds += stats.generate_seconds;
    total.stop_reason = stats.stop_reason;
    std::fprintf(stderr, "(%lld tokens reused, %lld evaluated, %lld generated at %.2f tok/s, stop: %s)\n",
                 static_cast<long long>(stats.n_reused), static_cast<long long>(stats.n_prompt),
                 static_cast<long long>(stats.n_generated), per_second(stats.n_generated, stats.generate_seconds),
                 stats.stop_reason.c_str());
  }
  return write_receipt(*engine, f.model, total);
}

}  // namespace

void add_chat_command(CLI::App& app, Runner& runner) {
  auto flags = std::make_shared<ChatFlags>();
  CLI::App* cmd = app.add_subcommand("chat", "chat in the terminal on the model's chat template (a turn per line)");
  add_model_flags(*cmd, flags->model);
  const std::vector<std::string> names = chat::builtin_names();
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : "|") + n;
  cmd->add_option("--chat-template", flags->chat_template,
                  "use a built-in template instead of the model's: " + list + " (default: the model's)")
      ->check(CLI::IsMember(names));
  cmd->add_option("--chat-template-file", flags->chat_template_file, "use the Jinja template in this file")
      ->excludes("--chat-template");
  cmd->add_option("-s,--system", flags->system, "system prompt (default: none)");
  add_number(*cmd, "-n,--n-predict", flags->n_predict, int64_t{-1}, kMaxTokens,
             "tokens per reply at most; -1 = until the end of the reply or a full context (default: -1)");
  add_sampling_flags(*cmd, flags->sampling, flags->seed);
  cmd->callback([flags, &runner] { runner = [flags] { return chat_loop(*flags); }; });
}

}  // namespace bitnet::cli
