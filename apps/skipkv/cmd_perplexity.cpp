// `skipkv perplexity`: chunked perplexity of a text file — the text's tokens
// are cut into consecutive windows of --ctx tokens, each window starts with
// BOS, and every other token is scored given the ones before it in its
// window. Progress (with an ETA) goes to stderr, the final estimate to stdout.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command_registry.h"
#include "engine_options.h"
#include "skipkv/engine.h"

namespace skipkv::cli {
namespace {

struct PplOptions {
  std::string model;
  std::string tokenizer;
  std::string file;
  PerplexityOptions ppl;
  bool no_bos = false;
  int threads = 0;
  std::string kv_type = "f16";
  std::string weights = "auto";
  int n_ubatch = 512;
  bool json = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv perplexity: %s\n", msg.c_str());
  return 1;
}

int RunPerplexity(const PplOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return Fail("cannot open text file '" + o.file + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto common = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, o.n_ubatch, o.weights);
  if (!common.ok()) return Fail(common.status().message());
  EngineOptions eo = *common;
  auto engine = Engine::Create(eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  PerplexityOptions po = o.ppl;
  po.add_bos = !o.no_bos;
  std::fprintf(stderr, "perplexity: %s, ctx %lld, %d windows per forward\n", (*engine)->info().name.c_str(),
               static_cast<long long>(po.ctx), po.batch);
  auto res = (*engine)->Perplexity(text, po, [](const PerplexityProgress& p) {
    std::fprintf(stderr, "[%lld/%lld] ppl %.4f | %lld tokens | %.1f s elapsed, ETA %.1f s\n",
                 static_cast<long long>(p.windows_done), static_cast<long long>(p.windows_total), p.ppl_so_far,
                 static_cast<long long>(p.tokens_scored), p.elapsed_s, p.eta_s);
  });
  if (!res.ok()) return Fail(res.status().ToString());
  if (o.json) {
    nlohmann::json j = {{"model", (*engine)->info().path}, {"model_name", (*engine)->info().name},
                        {"ctx", po.ctx},          {"windows", res->windows},
                        {"text_tokens", res->text_tokens}, {"tokens_scored", res->tokens_scored},
                        {"ppl", res->ppl},        {"mean_nll", res->mean_nll},
                        {"nll_stderr", res->nll_stddev}, {"seconds", res->seconds},
                        {"window_ppl", res->window_ppl}, {"kv_type", o.kv_type}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("Final estimate: PPL = %.4f +/- %.4f (%lld tokens scored in %lld windows of %lld, %.2f s)\n",
                res->ppl, res->ppl * res->nll_stddev, static_cast<long long>(res->tokens_scored),
                static_cast<long long>(res->windows), static_cast<long long>(po.ctx), res->seconds);
  }
  return 0;
}

CommandRegistrar reg("perplexity", "Chunked perplexity of a text file (mean NLL within windows of --ctx tokens)",
                     [](CLI::App& sub) {
  auto o = std::make_shared<PplOptions>();
  sub.add_option("-m,--model", o->model, "Model (default: the embedded stories260K)");
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  sub.add_option("-f,--file", o->file, "Text file to score")->required();
  sub.add_option("-c,--ctx", o->ppl.ctx, "Window length in tokens (>= 2, <= the model's context)")
      ->capture_default_str();
  sub.add_option("-b,--batch", o->ppl.batch, "Windows evaluated together in one forward")->capture_default_str();
  sub.add_option("--chunks", o->ppl.max_windows, "Score at most this many windows (0 = all)")->capture_default_str();
  sub.add_flag("--no-bos", o->no_bos, "Do not start every window with BOS");
  sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  AddWeightsOption(sub, &o->weights);
  sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  sub.add_option("--ubatch", o->n_ubatch, "Tokens per sequence per forward")->capture_default_str();
  sub.add_flag("--json", o->json, "Print the result as one JSON line");
  return [o] { return RunPerplexity(*o); };
});

}  // namespace
}  // namespace skipkv::cli
