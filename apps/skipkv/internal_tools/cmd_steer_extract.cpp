// `skipkv steer-extract`: SEAL's steering-vector extraction (spec §4.1).
//
// Stage 1 (skipped with --responses): greedy answers to the problems of a
// MATH-style JSONL (fields "problem", "answer"), one user turn in the chat
// template with SEAL's instruction, graded by skipkv eval's grader (R-KV's
// answer extraction and math_equal, src/eval/math_equal.h), each
// appended to <out>/generations.jsonl as soon as it is done; stops once N
// correct and N incorrect answers exist.
// Stage 2: the first N correct and first N incorrect responses (dataset order)
// are teacher-forced (prompt + response as one prefill), their thought is
// split at SPLIT tokens and classified (src/steer/thought_steps.h), and the
// residual at each step's preceding SPLIT token is summed per category at the
// input of every layer 1 .. n-1 and at the last layer's output (directions
// 0 .. n-1; direction.0 is not written, llama.cpp rejects it) into
// <out>/means.ckpt after every response.
// Output: <out>/<prefix>{execution,reflection,transition}_avg_vector.gguf and
// <out>/<prefix>steer_vector.gguf (V = execution - non-execution), as
// llama.cpp control vectors (docs/steering.md).
//
// Resumable: both stages commit after each unit (a generations line, an
// atomic checkpoint rename), so a killed run continues where it stopped; a
// truncated last line of generations.jsonl is dropped.
// Internal tool: it reads the residual stream at chosen tokens, classifies thought
// steps (src/steer) and writes control-vector files (src/io): a research
// pipeline below the public API by nature.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command_registry.h"
#include "engine/engine_internals.h"
#include "engine_options.h"
#include "eval/math_equal.h"
#include "io/embedded/embedded_model.h"
#include "io/model_source.h"
#include "model/model_config.h"
#include "progress_bar.h"
#include "skipkv/engine.h"
#include "skipkv/kv_config.h"
#include "steer/thought_steps.h"
#include "sentence/token_sets.h"
#include "tokenizer/tokenizer.h"
#include "util/json_depth.h"

namespace skipkv::cli {
namespace {

struct ExtractOptions {
  std::string model, tokenizer, dataset, responses, out_dir, prefix;
  int n = 500;
  int max_tokens = 1500;
  int batch = 8;
  int threads = 0;
  int n_ubatch = 512;
  int stop_after = 0;
};

constexpr const char* kInstruction =
    "Answer the following questions. You should think step-by-step and put your final answer within "
    "\\boxed{}.\nQuestion: ";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "skipkv steer-extract: %s\n", msg.c_str());
  return 1;
}

struct Generation {
  int64_t index = 0;
  bool correct = false;
  std::vector<int32_t> prompt_tokens, tokens;
};

// Reads generations.jsonl; a last line that does not parse (a run killed
// mid-write) is dropped and the file cut back to the last complete line.
StatusOr<std::vector<Generation>> ReadGenerations(const std::string& path, bool repair) {
  std::vector<Generation> out;
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  std::string line;
  std::streamoff good_end = 0;
  int64_t line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    const bool complete = !f.eof();
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(line, path, line_no));  // before parsing: issue 43
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !complete) {
      if (f.peek() == std::char_traits<char>::eof() && repair) {
        f.close();
        std::filesystem::resize_file(path, static_cast<uintmax_t>(good_end));
        std::fprintf(stderr, "steer-extract: dropped a truncated last line of %s\n", path.c_str());
        return out;
      }
      return CorruptData(path + ":" + std::to_string(line_no) + ": not a JSON object");
    }
    good_end = f.tellg();
    try {
      Generation g;
      g.index = j.at("index").get<int64_t>();
      g.correct = j.at("correct").get<bool>();
      g.prompt_tokens = j.at("prompt_tokens").get<std::vector<int32_t>>();
      g.tokens = j.at("tokens").get<std::vector<int32_t>>();
      out.push_back(std::move(g));
    } catch (const nlohmann::json::exception& e) {
      return CorruptData(path + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  return out;
}

// --responses: lines with "problem" (or "prompt_tokens"), "response" (or
// "tokens") and "correct".
StatusOr<std::vector<Generation>> ReadResponses(const std::string& path, Engine& engine) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot open responses file '" + path + "'");
  std::vector<Generation> out;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(line, path, line_no));  // before parsing: issue 43
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
    try {
      Generation g;
      g.index = line_no - 1;
      g.correct = j.at("correct").get<bool>();
      if (j.contains("prompt_tokens")) {
        g.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
      } else {
        auto ids = engine.Tokenize(kInstruction + j.at("problem").get<std::string>(), true, true);
        if (!ids.ok()) return ids.status().WithContext(where);
        g.prompt_tokens = *ids;
      }
      if (j.contains("tokens")) {
        g.tokens = j["tokens"].get<std::vector<int32_t>>();
      } else {
        auto ids = engine.Tokenize(j.at("response").get<std::string>(), false, false);
        if (!ids.ok()) return ids.status().WithContext(where);
        g.tokens = *ids;
      }
      out.push_back(std::move(g));
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(where + ": " + e.what());
    }
  }
  return out;
}

struct Problem {
  std::string problem, answer;
};

StatusOr<std::vector<Problem>> ReadDataset(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot open dataset '" + path + "'");
  std::vector<Problem> out;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty()) continue;
    SKIPKV_RETURN_IF_ERROR(CheckJsonDepth(line, path, line_no));  // before parsing: issue 43
    auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = path + ":" + std::to_string(line_no);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
    if (!j.contains("problem") || !j["problem"].is_string() || !j.contains("answer") || !j["answer"].is_string()) {
      return InvalidArgument(where + ": needs string fields \"problem\" and \"answer\"");
    }
    out.push_back({j["problem"].get<std::string>(), j["answer"].get<std::string>()});
  }
  return out;
}

// Stage 1. Returns false (and prints) when --stop-after ended it early.
StatusOr<bool> Generate(const ExtractOptions& o, Engine& engine, const std::string& gen_path, int* units) {
  SKIPKV_ASSIGN_OR_RETURN(std::vector<Problem> problems, ReadDataset(o.dataset));
  SKIPKV_ASSIGN_OR_RETURN(std::vector<Generation> done, ReadGenerations(gen_path, true));
  int64_t n_ok = 0, n_bad = 0;
  for (const Generation& g : done) (g.correct ? n_ok : n_bad) += 1;
  size_t next = done.empty() ? 0 : static_cast<size_t>(done.back().index + 1);
  ProgressBar bar("generate");
  std::ofstream out(gen_path, std::ios::app | std::ios::binary);
  if (!out) return IoError("cannot append to " + gen_path);
  while ((n_ok < o.n || n_bad < o.n) && next < problems.size()) {
    if (o.stop_after > 0 && *units >= o.stop_after) return false;
    std::vector<Request> reqs;
    const size_t first = next;
    for (; next < problems.size() && reqs.size() < static_cast<size_t>(o.batch); ++next) {
      Request r;
      r.prompt = kInstruction + problems[next].problem;
      r.chat = true;
      r.max_new_tokens = o.max_tokens;
      reqs.push_back(std::move(r));
    }
    SKIPKV_ASSIGN_OR_RETURN(std::vector<GenerationResult> res, engine.Generate(reqs));
    for (size_t k = 0; k < res.size(); ++k) {
      const Problem& p = problems[first + k];
      const eval::Grade grade = eval::GradeOutput(res[k].text, p.answer);
      const std::string& pred = grade.extracted;
      const bool correct = grade.equal;
      (correct ? n_ok : n_bad) += 1;
      nlohmann::json j = {{"index", first + k},        {"correct", correct},
                          {"pred", pred},              {"answer", p.answer},
                          {"prompt_tokens", res[k].prompt_tokens}, {"tokens", res[k].tokens}};
      out << j.dump() << "\n";
      out.flush();
      ++*units;
    }
    bar.Update(static_cast<double>(std::min<int64_t>(n_ok, o.n) + std::min<int64_t>(n_bad, o.n)), 2.0 * o.n,
               std::to_string(n_ok) + " correct, " + std::to_string(n_bad) + " incorrect of " + std::to_string(next));
  }
  if (n_ok < o.n || n_bad < o.n) {
    std::fprintf(stderr, "steer-extract: the dataset ran out: %lld correct, %lld incorrect (wanted %d each)\n",
                 static_cast<long long>(n_ok), static_cast<long long>(n_bad), o.n);
  }
  return true;
}

int RunExtract(const ExtractOptions& o) {
  if (o.n < 1) return Fail("-n must be >= 1");
  if (o.batch < 1) return Fail("--batch must be >= 1");
  if (o.dataset.empty() == o.responses.empty()) return Fail("give exactly one of --dataset and --responses");
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return Fail("cannot create " + o.out_dir + ": " + ec.message());
  auto common = CommonEngineOptions(o.model, o.tokenizer, o.threads, "f32", o.n_ubatch);
  if (!common.ok()) return Fail(common.status().message());
  auto engine_or = Engine::Create(*common);
  if (!engine_or.ok()) return Fail(engine_or.status().ToString());
  Engine& engine = **engine_or;
  // The tokenizer for the SPLIT / think ids and the width (the engine's
  // model, opened again: mmapped, cheap).
  auto src = OpenModel(o.model.empty() ? std::string(kEmbeddedModelPath) : o.model, o.tokenizer);
  if (!src.ok()) return Fail(src.status().ToString());
  auto config = ModelConfigFromSource(**src);
  if (!config.ok()) return Fail(config.status().ToString());
  const int n_layers = config->n_layers;
  const int64_t width = config->d_model;
  if (n_layers < 2) return Fail("the model needs at least 2 layers");
  auto tok = Tokenizer::FromModelSource(**src);
  if (!tok.ok()) return Fail(tok.status().ToString());
  auto sets = BuildSkipkvTokenSets(**tok, DefaultSentenceDelimiters());
  if (!sets.ok()) return Fail(sets.status().ToString());

  int units = 0;
  std::vector<Generation> gens;
  if (o.responses.empty()) {
    const std::string gen_path = o.out_dir + "/generations.jsonl";
    auto finished = Generate(o, engine, gen_path, &units);
    if (!finished.ok()) return Fail(finished.status().ToString());
    if (!*finished) {
      std::fprintf(stderr, "steer-extract: stopped after %d units (--stop-after); run again to continue\n", units);
      return 0;
    }
    auto g = ReadGenerations(gen_path, false);
    if (!g.ok()) return Fail(g.status().ToString());
    gens = std::move(g).value();
  } else {
    auto g = ReadResponses(o.responses, engine);
    if (!g.ok()) return Fail(g.status().ToString());
    gens = std::move(g).value();
  }
  // The first N correct and the first N incorrect, in dataset order.
  std::vector<const Generation*> picked;
  int64_t n_ok = 0, n_bad = 0;
  for (const Generation& g : gens) {
    int64_t& c = g.correct ? n_ok : n_bad;
    if (c < o.n) picked.push_back(&g), ++c;
  }
  if (picked.empty()) return Fail("no responses to extract from");
  std::string signature;
  for (const Generation* g : picked) signature += std::to_string(g->index) + (g->correct ? "c " : "i ");
  const std::string sel_path = o.out_dir + "/selection.txt", ckpt = o.out_dir + "/means.ckpt";
  CategoryMeans means(n_layers, width);
  if (std::filesystem::exists(ckpt)) {
    std::ifstream sf(sel_path);
    const std::string old((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
    if (old != signature) {
      return Fail(ckpt + " was made for another selection of responses; delete it (and " + sel_path +
                  ") to start stage 2 again");
    }
    auto m = CategoryMeans::Load(ckpt);
    if (!m.ok()) return Fail(m.status().ToString());
    if (m->n_directions() != n_layers || m->width() != width) {
      return Fail(ckpt + " holds " + std::to_string(m->n_directions()) + " directions of width " +
                  std::to_string(m->width()) + ", this model needs " + std::to_string(n_layers) +
                  " of width " + std::to_string(width) +
                  " (another model, or an older checkpoint without the last layer's direction): delete it "
                  "and " + sel_path + " to start stage 2 again");
    }
    means = std::move(m).value();
  } else {
    std::ofstream sf(sel_path, std::ios::trunc);
    sf << signature;
    if (!sf) return Fail("cannot write " + sel_path);
  }

  ProgressBar bar("teacher-force");
  const Tokenizer& tk = **tok;
  auto decode = [&](std::span<const int32_t> ids) {
    DecodeOptions d;
    d.skip_special = true;
    auto s = tk.Decode(ids, d);
    return s.ok() ? *s : std::string();
  };
  for (size_t k = static_cast<size_t>(means.responses_done); k < picked.size(); ++k) {
    if (o.stop_after > 0 && units >= o.stop_after) {
      std::fprintf(stderr, "steer-extract: stopped after %d units (--stop-after); run again to continue\n", units);
      return 0;
    }
    const Generation& g = *picked[k];
    Request r;
    r.prompt_tokens = g.prompt_tokens;
    r.prompt_tokens.insert(r.prompt_tokens.end(), g.tokens.begin(), g.tokens.end());
    r.max_new_tokens = 1;
    std::vector<ThoughtStep> steps = SegmentThought(r.prompt_tokens, static_cast<int64_t>(g.prompt_tokens.size()),
                                                    *sets, decode);
    CategoryMeans next = means;
    EngineInternals::SetSequenceHooks(engine, [&](size_t, const Request&) {
      return std::make_unique<HiddenStateCollector>(steps, n_layers, &next);
    });
    auto res = engine.Generate(std::span<const Request>(&r, 1));
    EngineInternals::SetSequenceHooks(engine, nullptr);
    if (!res.ok()) return Fail("response " + std::to_string(g.index) + ": " + res.status().ToString());
    next.responses_done = static_cast<int64_t>(k + 1);
    Status st = next.Save(ckpt);
    if (!st.ok()) return Fail(st.ToString());
    means = std::move(next);
    ++units;
    bar.Update(static_cast<double>(k + 1), static_cast<double>(picked.size()),
               std::to_string(means.count(ThoughtKind::kExecution)) + " E / " +
                   std::to_string(means.count(ThoughtKind::kReflection)) + " R / " +
                   std::to_string(means.count(ThoughtKind::kTransition)) + " T steps");
  }

  const std::string hint = engine.info().architecture;
  for (ThoughtKind kind : {ThoughtKind::kExecution, ThoughtKind::kReflection, ThoughtKind::kTransition}) {
    ControlVector cv = means.Mean(kind);
    const std::string path = o.out_dir + "/" + o.prefix + ThoughtKindName(kind) + "_avg_vector.gguf";
    if (cv.directions.empty()) {
      std::fprintf(stderr, "steer-extract: no %s step, %s not written\n", ThoughtKindName(kind), path.c_str());
      continue;
    }
    cv.model_hint = hint;
    Status st = WriteControlVector(path, cv, n_layers);
    if (!st.ok()) return Fail(st.ToString());
    std::printf("%s: %lld steps\n", path.c_str(), static_cast<long long>(means.count(kind)));
  }
  auto diff = means.Difference();
  if (!diff.ok()) return Fail(diff.status().message());
  diff->model_hint = hint;
  const std::string vpath = o.out_dir + "/" + o.prefix + "steer_vector.gguf";
  Status st = WriteControlVector(vpath, *diff, n_layers);
  if (!st.ok()) return Fail(st.ToString());
  std::printf("%s: V = execution - non-execution over %zu responses, direction.1..%d\n", vpath.c_str(),
              picked.size(), n_layers - 1);
  return 0;
}

CommandRegistrar reg("steer-extract", "Extract a SEAL/SkipKV steering vector (spec 4.1) as llama.cpp control vectors",
                     [](CLI::App& sub) {
  auto o = std::make_shared<ExtractOptions>();
  sub.add_option("-m,--model", o->model, "Model (default: the embedded stories260K)");
  sub.add_option("--tokenizer", o->tokenizer, "llama2.c models: tokenizer.bin (default: beside the model)");
  sub.add_option("--dataset", o->dataset, "MATH-style JSONL with \"problem\" and \"answer\" (stage 1)");
  sub.add_option("--responses", o->responses,
                 "JSONL of ready responses (\"problem\" or \"prompt_tokens\", \"response\" or \"tokens\", "
                 "\"correct\"): skip generation");
  sub.add_option("-o,--out-dir", o->out_dir, "Output and resume directory")->required();
  sub.add_option("--prefix", o->prefix, "File name prefix of the written vectors")->capture_default_str();
  sub.add_option("-n", o->n, "Correct and incorrect responses to use, each")->capture_default_str();
  sub.add_option("--max-tokens", o->max_tokens, "Generation limit per answer")->capture_default_str();
  sub.add_option("--batch", o->batch, "Problems generated together")->capture_default_str();
  sub.add_option("-t,--threads", o->threads, "Worker threads (0 = all cores)")->capture_default_str();
  sub.add_option("--ubatch", o->n_ubatch, "Tokens per sequence per forward")->capture_default_str();
  sub.add_option("--stop-after", o->stop_after,
                 "Stop after this many units (answers generated + responses teacher-forced); run again to continue")
      ->capture_default_str();
  return [o] { return RunExtract(*o); };
});

}  // namespace
}  // namespace skipkv::cli
