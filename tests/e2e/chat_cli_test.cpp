// `bitnet chat`: turns read from stdin, answers on stdout, the model's template (or a built-in),
// the KV cache reused across turns, /reset, Ctrl-C stopping a reply but not the program.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "golden_util.h"

namespace bitnet {
namespace {

namespace fs = std::filesystem;

const char* const kSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
const char* const kQuestion = "What is the capital of France? Answer in one sentence.";

using test::Output;
using test::slurp;
fs::path temp_dir() { return test::cli_temp_dir(); }
// bitnet chat with a real model takes longer than the other commands.
Output run_cli(const std::string& args, const std::string& input = "") { return test::run_cli(args, input, 300); }

fs::path smollm() { return test::shared_dir() / "models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(ChatCli, SmolLM2AnswersOnItsOwnTemplateAndReusesTheCache) {
  if (!fs::exists(smollm())) GTEST_SKIP() << "missing test data: " << smollm();
  const std::string input = std::string(kQuestion) + "\nAnd of Germany?\n/reset\n" + kQuestion + "\n";
  const Output o = run_cli("chat -m " + smollm().string() + " --temp 0 -t 2 -c 1024 -s '" + kSystem + "'", input);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::vector<std::string> replies = lines(o.out);
  ASSERT_EQ(replies.size(), 3u) << o.out;
  EXPECT_NE(replies[0].find("Paris"), std::string::npos) << replies[0];  // llama.cpp: "The capital of France is Paris."
  EXPECT_NE(replies[1].find("Berlin"), std::string::npos) << replies[1];
  EXPECT_EQ(replies[2], replies[0]);  // after /reset, greedy: the same answer
  EXPECT_NE(o.err.find("chat template: gguf"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(conversation reset)"), std::string::npos) << o.err;
  // The second turn evaluates only what follows the first turn's tokens in the KV cache.
  const std::vector<std::string> stats = [&] {
    std::vector<std::string> s;
    for (const std::string& l : lines(o.err))
      if (l.find("tokens reused") != std::string::npos) s.push_back(l);
    return s;
  }();
  ASSERT_EQ(stats.size(), 3u) << o.err;
  EXPECT_EQ(stats[0].rfind("(0 tokens reused", 0), 0u) << stats[0];
  EXPECT_NE(stats[1].rfind("(0 tokens reused", 0), 0u) << stats[1];
  EXPECT_EQ(stats[2].rfind("(0 tokens reused", 0), 0u) << stats[2];
}

TEST(ChatCli, CtrlCStopsTheReplyNotTheProgram) {
  if (!fs::exists(smollm())) GTEST_SKIP() << "missing test data: " << smollm();
  const fs::path out = temp_dir() / "ctrlc.out", err = temp_dir() / "ctrlc.err";
  int in[2];
  ASSERT_EQ(::pipe(in), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::close(in[0]);
    ::close(in[1]);
    const int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fo, STDOUT_FILENO);
    ::dup2(fe, STDERR_FILENO);
    const std::string model = smollm().string();
    ::execl(BITNET_CLI_PATH, "bitnet", "chat", "-m", model.c_str(), "--temp", "0", "-t", "2", "-c", "1024", "-n", "3000",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  const auto say = [&](const std::string& line) {
    const std::string l = line + "\n";
    ASSERT_EQ(::write(in[1], l.data(), l.size()), static_cast<ssize_t>(l.size()));
  };
  const auto wait_for = [&](const fs::path& p, const std::string& needle) {
    for (int i = 0; i < 1200; ++i) {
      if (slurp(p).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  say("Write a very long story about a dragon, at least two thousand words.");
  EXPECT_TRUE(wait_for(out, " ")) << "no reply started: " << slurp(err);
  ::kill(pid, SIGINT);
  EXPECT_TRUE(wait_for(err, "stop: stopped")) << slurp(err);
  say(kQuestion);
  EXPECT_TRUE(wait_for(out, "Paris")) << slurp(out) << slurp(err);
  ::close(in[1]);  // EOF ends the program
  int status = 0;
  for (int i = 0; i < 600 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "bitnet chat did not end at EOF";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(err);
}

TEST(ChatCli, SynthesizedModelChatsOnTheDefaultTemplate) {
  const fs::path model = temp_dir() / "tiny.gguf";
  const Output s = run_cli("synth -o " + model.string() + " --preset tiny --type i2_s");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  // No tokenizer.chat_template: the bitnet architecture's (ChatML for others, as llama.cpp);
  // then a built-in by name.
  const fs::path receipt = temp_dir() / "chat_receipt.json";
  Output o = run_cli("chat -m " + model.string() + " -n 4 --temp 0 -t 2 --receipt " + receipt.string(),
                     "hello\n\n/exit\nnot read\n");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("chat template: bitnet"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("4 generated"), std::string::npos) << o.err;
  EXPECT_EQ(lines(o.out).size(), 1u) << o.out;
  EXPECT_NE(slurp(receipt).find("\"generated\": 4"), std::string::npos) << slurp(receipt);
  o = run_cli("chat -m " + model.string() + " -n 2 --temp 0 --chat-template llama2 -s sys", "hi\nagain\n");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("chat template: llama2"), std::string::npos) << o.err;
  EXPECT_EQ(lines(o.out).size(), 2u) << o.out;
  fs::remove(model);
}

TEST(ChatCli, BadTemplatesAreCleanErrors) {
  const fs::path model = temp_dir() / "tiny-err.gguf";
  ASSERT_EQ(run_cli("synth -o " + model.string() + " --preset tiny --type f16").exit_code, 0);
  Output o = run_cli("chat -m " + model.string() + " --chat-template nope", "hi\n");
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("llama3"), std::string::npos) << o.err;  // the names allowed
  const fs::path bad = temp_dir() / "bad.jinja";
  std::ofstream(bad) << "{% for m in messages %}{{ m.content ";
  o = run_cli("chat -m " + model.string() + " --chat-template-file " + bad.string(), "hi\n");
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_NE(o.err.find("error: "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("bad.jinja: chat template: line 1"), std::string::npos) << o.err;
  // A template that raises on a turn: the error is printed and the chat goes on.
  const fs::path raises = temp_dir() / "raises.jinja";
  std::ofstream(raises) << "{% if messages | length > 1 %}{{ raise_exception('only one turn') }}{% endif %}{{ messages[0].content }}";
  o = run_cli("chat -m " + model.string() + " -n 1 --temp 0 -s sys --chat-template-file " + raises.string(), "hi\n");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("only one turn"), std::string::npos) << o.err;
  fs::remove(model);
}

TEST(ChatCli, ServeTakesOnlyABuiltInTemplateName) {
  // (The chat endpoint renders with ChatTemplate::for_model; src/server's tests cover the HTTP side.)
  const Output o = run_cli("serve -m /nonexistent.gguf --chat-template nope");
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("chatml"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace bitnet
