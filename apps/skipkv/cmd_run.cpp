// `skipkv run`: generate text with a model (the embedded stories260K by
// default), streaming tokens to stdout as they are produced and printing a
// summary (tokens, speed, KV memory, compressions) to stderr. Several -p
// options (or --prompts FILE) make several requests that run together under
// the continuous-batching (ragged) or padded scheduler.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command_registry.h"
#include "engine_options.h"
#include "method_flags.h"
#include "preset_file_flag.h"
#include "skipkv/engine.h"
#include "skipkv/method_args.h"

namespace skipkv::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string tokenizer;
  std::vector<std::string> prompts;
  std::string prompt_file;
  std::string prompts_file;
  bool chat = false;
  std::string system;
  std::string chat_template = "auto";
  int n_predict = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int threads = 0;
  std::string kv_type = "f16";
  std::string weights = "auto";
  MethodConfig method;       // every request's method: name (--method PRESET), kv, steer
  MethodFlags method_flags;  // the flags of `method`'s declared parameters (skipkv/method_args.h)
  PresetFileFlag presets;    // --presets FILE: more names for --method
  int batch_size = 0;
  bool no_sort = false;
  int n_ubatch = 512;
  int64_t n_ctx = 0;
  bool json = false;
  bool quiet = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv run: %s\n", msg.c_str());
  return 1;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IoError("cannot read '" + path + "'");
  return s;
}

std::string FormatBytes(size_t b) {
  char buf[64];
  if (b >= (1u << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1u << 30));
  else if (b >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1u << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

// The text of every stream position (Δpad pads as "", then prompt and
// generated ids), for the eviction view: each piece is what the id adds to
// the decoded text of up to 8 ids before it (so SentencePiece's leading
// spaces survive); the id decoded alone where that is not a plain suffix.
nlohmann::json StreamPieces(const GenerationResult& r, const Engine& engine) {
  std::vector<int32_t> ids = r.prompt_tokens;
  ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
  nlohmann::json pieces = nlohmann::json::array();
  for (int64_t i = 0; i < r.kv.pad_len; ++i) pieces.push_back("");
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t from = i >= 8 ? i - 8 : 0;
    const std::span<const int32_t> all(ids.data() + from, i + 1 - from);
    auto before = engine.Detokenize(all.first(all.size() - 1));
    auto with = engine.Detokenize(all);
    if (before.ok() && with.ok() && with->size() >= before->size() && with->compare(0, before->size(), *before) == 0) {
      pieces.push_back(with->substr(before->size()));
    } else {
      auto alone = engine.Detokenize(all.last(1));
      pieces.push_back(alone.ok() ? *alone : std::string());
    }
  }
  return pieces;
}

nlohmann::json ResultJson(const GenerationResult& r, const RunOptions& o, const Engine& engine) {
  const GenerationTimings& t = r.timings;
  const KvStats& kv = r.kv;
  const EngineOptions& eo = engine.options();
  nlohmann::json diagnostics = nlohmann::json::object();
  for (const auto& [name, value] : r.diagnostics) diagnostics[name] = value;
  // Spec §6.10 per row: compressions, redundant slots evicted per
  // compression (the method's penalty; SkipKV), Δpad and B′ next to the
  // method's own counters (|T|, N_o, sentences from its hooks).
  diagnostics["kv.compressions"] = kv.compressions;
  diagnostics["kv.pad_len"] = kv.pad_len;
  diagnostics["kv.effective_budget"] = kv.effective_budget;
  if (!kv.penalized_evicted_per_compression.empty()) {
    diagnostics["kv.penalized_evicted"] = kv.penalized_evicted;
    diagnostics["kv.penalized_evicted_per_compression"] = kv.penalized_evicted_per_compression;
  }
  nlohmann::json j = {
      {"method", nlohmann::json::parse(MethodJson(r.method))},
      {"diagnostics", diagnostics},
      {"index", r.index},
      {"text", r.text},
      {"tokens", r.tokens},
      {"finish", FinishReasonName(r.finish)},
      {"stop_string", r.stop_string},
      {"prompt_tokens", r.prompt_tokens.size()},
      {"generated_tokens", r.tokens.size()},
      {"batch", r.batch},
      {"timings",
       {{"queue_ms", t.queue_ms}, {"prefill_ms", t.prefill_ms}, {"decode_ms", t.decode_ms},
        {"decode_steps", t.decode_steps}, {"decode_tokens_per_s", t.decode_tokens_per_s},
        {"total_ms", t.total_ms}}},
      {"kv",
       {{"peak_live_bytes", kv.peak_live_bytes}, {"final_live_bytes", kv.final_live_bytes},
        {"allocated_bytes", kv.allocated_bytes}, {"peak_slots", kv.peak_slots}, {"final_slots", kv.final_slots},
        {"compressions", kv.compressions}, {"slots_evicted", kv.slots_evicted}, {"compress_ms", kv.compress_ms},
        {"pad_len", kv.pad_len}, {"effective_budget", kv.effective_budget},
        {"penalized_evicted", kv.penalized_evicted}}},
      // Provenance: enough to rerun it. The method's parameters come from
      // their declaration (MethodArgsJson: every declared field, by key).
      {"config",
       {{"model", engine.info().path}, {"model_name", engine.info().name}, {"chat", o.chat},
        {"chat_template", engine.info().chat_template}, {"kv_type", o.kv_type},
        {"batch_size", eo.batch_size}, {"n_ubatch", eo.n_ubatch}, {"threads", o.threads},
        {"temperature", o.sampling.temperature}, {"top_k", o.sampling.top_k}, {"top_p", o.sampling.top_p},
        {"min_p", o.sampling.min_p}, {"repeat_penalty", o.sampling.repeat_penalty},
        {"repeat_last_n", o.sampling.repeat_last_n}, {"seed", o.sampling.seed}, {"max_new_tokens", o.n_predict}}},
  };
  // The engine overwrites the pad policy and trace of a request's method with
  // its own, so r.method holds what ran.
  j["config"].update(nlohmann::json::parse(MethodArgsJson(r.method)));
  if (!o.method.kv.trace_path.empty()) j["stream_pieces"] = StreamPieces(r, engine);
  return j;
}

void PrintSummary(const GenerationResult& r, size_t n_requests) {
  const GenerationTimings& t = r.timings;
  const KvStats& kv = r.kv;
  std::string who = n_requests > 1 ? "[" + std::to_string(r.index) + "] " : "";
  const double prefill_tps = t.prefill_ms > 0 ? t.prompt_tokens / (t.prefill_ms / 1000.0) : 0.0;
  std::fprintf(stderr,
               "%sfinish: %s | prompt %lld tokens, prefill %.1f ms (%.1f tok/s) | generated %zu tokens, "
               "decode %.2f tok/s\n",
               who.c_str(), FinishReasonName(r.finish), static_cast<long long>(t.prompt_tokens), t.prefill_ms,
               prefill_tps, r.tokens.size(), t.decode_tokens_per_s);
  std::fprintf(stderr,
               "%sKV: peak %s live (%lld slots/layer), %s allocated | compressions %lld, slots evicted %lld "
               "(%.1f ms)\n",
               who.c_str(), FormatBytes(kv.peak_live_bytes).c_str(), static_cast<long long>(kv.peak_slots),
               FormatBytes(kv.allocated_bytes).c_str(), static_cast<long long>(kv.compressions),
               static_cast<long long>(kv.slots_evicted), kv.compress_ms);
  if (!kv.penalized_evicted_per_compression.empty() || !r.diagnostics.empty()) {
    std::string line;
    if (!kv.penalized_evicted_per_compression.empty())
      line += "penalised slots evicted " + std::to_string(kv.penalized_evicted);
    for (const auto& [name, value] : r.diagnostics) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %g", line.empty() ? "" : ", ", name.c_str(), value);
      line += buf;
    }
    std::fprintf(stderr, "%s%s: %s\n", who.c_str(), MethodLabel(r.method).c_str(), line.c_str());
  }
}

int RunGenerate(RunOptions o) {
  auto common = CommonEngineOptions(o.model, o.tokenizer, o.threads, o.kv_type, o.n_ubatch, o.weights);
  if (!common.ok()) return Fail(common.status().message());
  EngineOptions eo = *common;
  eo.kv = o.method.kv;
  eo.steer = o.method.steer;
  eo.batch_size = o.batch_size;
  eo.sort_by_length = !o.no_sort;
  eo.n_ctx = o.n_ctx;
  eo.chat_template = o.chat_template;

  // Prompts: every -p, the -f file (one prompt), each non-empty line of
  // --prompts; none at all = one empty prompt (start from BOS).
  std::vector<std::string> prompts = o.prompts;
  if (!o.prompt_file.empty()) {
    auto text = ReadFile(o.prompt_file);
    if (!text.ok()) return Fail("-f: " + text.status().message());
    prompts.push_back(*text);
  }
  if (!o.prompts_file.empty()) {
    auto text = ReadFile(o.prompts_file);
    if (!text.ok()) return Fail("--prompts: " + text.status().message());
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) prompts.push_back(line);
    }
  }
  if (prompts.empty()) prompts.push_back("");

  auto engine = Engine::Create(eo);
  if (!engine.ok()) return Fail(engine.status().ToString());
  std::vector<Request> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request& r = requests[i];
    r.prompt = prompts[i];
    r.chat = o.chat;
    r.system = o.system;
    r.sampling = o.sampling;
    r.max_new_tokens = o.n_predict;
    r.stop = o.stop;
    r.ignore_eos = o.ignore_eos;
    if (!o.method.name.empty()) r.method = MethodConfig{o.method.name, eo.kv, eo.steer};
  }

  // Stream a single request's text; several requests print their results
  // one after the other at the end (their tokens interleave).
  const bool stream = !o.json && requests.size() == 1;
  TokenCallback cb;
  if (stream) {
    cb = [](const TokenEvent& ev) {
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  auto results = (*engine)->Generate(requests, cb);
  if (!results.ok()) return Fail(results.status().ToString());
  for (const GenerationResult& r : *results) {
    if (o.json) {
      std::printf("%s\n", ResultJson(r, o, **engine).dump().c_str());
    } else if (stream) {
      std::printf("\n");
    } else {
      std::printf("--- request %zu ---\n%s\n", r.index, r.text.c_str());
    }
  }
  std::fflush(stdout);
  if (!o.quiet) {
    std::fprintf(stderr, "model: %s (%s) | kv: %s", (*engine)->info().name.c_str(),
                 (*engine)->info().description.c_str(), eo.kv.policy.c_str());
    if (TraitsOf(eo.kv).evicts) {
      std::fprintf(stderr, " budget %lld window %d interval %lld", static_cast<long long>(eo.kv.budget),
                   eo.kv.window, static_cast<long long>(eo.kv.interval));
    }
    std::fprintf(stderr, " %s, %s\n", o.kv_type.c_str(),
                 eo.kv.pad_policy == PadPolicy::kPadded ? "padded" : "ragged");
    for (const GenerationResult& r : *results) PrintSummary(r, results->size());
    if (results->size() > 1) {
      size_t generated = 0;
      double wall_ms = 0;
      for (const GenerationResult& r : *results) {
        generated += r.tokens.size();
        wall_ms = std::max(wall_ms, r.timings.total_ms);
      }
      std::fprintf(stderr, "total: %zu requests, %zu tokens generated in %.1f ms (%.1f tok/s aggregate)\n",
                   results->size(), generated, wall_ms, wall_ms > 0 ? generated / (wall_ms / 1000.0) : 0.0);
    }
  }
  return 0;
}

CommandRegistrar reg("run", "Generate text (streams tokens; default: a story from the embedded model)",
                     [](CLI::App& sub) {
  auto o = std::make_shared<RunOptions>();
  sub.add_option("-m,--model", o->model,
                 "Model: .gguf file, Hugging Face checkpoint directory or llama2.c .bin "
                 "(default: the embedded stories260K)");
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  sub.add_option("-p,--prompt", o->prompts,
                 "Prompt text; repeat for several requests run as one batch (none: start from BOS)");
  sub.add_option("-f,--file", o->prompt_file, "Read one prompt from this file");
  sub.add_option("--prompts", o->prompts_file, "Read one prompt per non-empty line of this file");
  sub.add_flag("--chat", o->chat,
               "Wrap each prompt in the chat template as one user turn plus the generation prompt "
               "(DeepSeek-R1-Distill: ...<｜Assistant｜><think>\\n)");
  sub.add_option("--system", o->system, "--chat: a system message placed before the user turn");
  sub.add_option("--chat-template", o->chat_template,
                 "--chat: auto (from the vocabulary), r1-distill, chatml or raw (prompt as is)")
      ->capture_default_str();
  sub.add_option("-n,--n-predict", o->n_predict, "Maximum new tokens per request (>= 1)")->capture_default_str();
  sub.add_option("--temp", o->sampling.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub.add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  sub.add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass in (0, 1] (1 = off)")->capture_default_str();
  sub.add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p x the top probability, in [0, 1] (0 = off)")
      ->capture_default_str();
  sub.add_option("--repeat-penalty", o->sampling.repeat_penalty,
                 "Penalise tokens seen in the last --repeat-last-n (divide positive logits, multiply "
                 "negative ones; 1 = off)")
      ->capture_default_str();
  sub.add_option("--repeat-last-n", o->sampling.repeat_last_n,
                 "Window of the repetition penalty (-1 = whole sequence, 0 = off)")
      ->capture_default_str();
  sub.add_option("-s,--seed", o->sampling.seed, "Random seed of each request's sampler")->capture_default_str();
  sub.add_option("--stop", o->stop, "Stop when this text appears (repeatable; the text is cut before it)");
  sub.add_flag("--ignore-eos", o->ignore_eos, "Keep generating through end-of-generation tokens");
  sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  AddWeightsOption(sub, &o->weights);
  sub.add_option("--kv-type", o->kv_type, "KV cache element type: f16 or f32")->capture_default_str();
  o->method_flags.Add(sub, &o->method, kArgRun, /*run_extras=*/true);
  o->presets.Add(sub);
  sub.add_option("--batch-size", o->batch_size,
                 "ragged: most requests active at once; padded: rows per left-padded batch (0 = all)")
      ->capture_default_str();
  sub.add_flag("--no-sort", o->no_sort, "padded: batch requests in submission order, not by prompt length");
  sub.add_option("--ubatch", o->n_ubatch, "Prefill chunk: most prompt tokens per sequence per forward")
      ->capture_default_str();
  sub.add_option("-c,--ctx", o->n_ctx, "Context length to allow (0 = the model's)")->capture_default_str();
  sub.add_flag("--json", o->json, "Print one JSON result line per request instead of the text");
  sub.add_flag("-q,--quiet", o->quiet, "No summary on stderr");
  return [o] {
    if (Status st = o->presets.Load(); !st.ok()) return Fail(st.message());
    if (Status st = o->method_flags.FinishRun(o->presets.context(o->model)); !st.ok())
      return Fail(st.message());
    if (!o->method_flags.note().empty() && !o->quiet)
      std::fprintf(stderr, "skipkv run: note: %s\n", o->method_flags.note().c_str());
    return RunGenerate(*o);
  };
});

}  // namespace
}  // namespace skipkv::cli
