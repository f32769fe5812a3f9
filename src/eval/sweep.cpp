#include "eval/sweep.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "eval/extract.h"
#include "eval/math_equal.h"
#include "eval/provenance.h"

namespace skipkv::eval {
namespace {

struct Item {
  size_t pair = 0;     // index into config.pairs
  size_t problem = 0;  // index into config.problems
  int sample = 0;
  RowKey key;
};

uint64_t SampleSeed(uint64_t base, const std::string& problem, int sample) {
  uint64_t h = base ^ 0x9E3779B97F4A7C15ull;
  for (unsigned char c : problem) h = (h ^ c) * 1099511628211ull;
  h ^= static_cast<uint64_t>(sample) * 0xff51afd7ed558ccdull;
  h ^= h >> 29;
  return h;
}

// The prompt text of a problem in a style: code rows carry their
// LiveCodeBench prompt as the question.
std::string RequestText(const SweepConfig& c, PromptStyle style, const Problem& p) {
  return c.dataset.code ? p.question : PromptText(style, p.question);
}

int64_t PairBudget(const MethodPreset& p) { return p.full() ? 0 : p.method.kv.budget; }

std::string PairLabel(const MethodPreset& p) {
  return p.full() ? p.method.name : p.method.name + "@" + std::to_string(p.method.kv.budget);
}

nlohmann::json KvJson(const KvStats& kv) {
  return {{"peak_live_bytes", kv.peak_live_bytes},
          {"final_live_bytes", kv.final_live_bytes},
          {"allocated_bytes", kv.allocated_bytes},
          {"peak_slots", kv.peak_slots},
          {"final_slots", kv.final_slots},
          {"compressions", kv.compressions},
          {"slots_evicted", kv.slots_evicted},
          {"compress_ms", kv.compress_ms},
          {"pad_len", kv.pad_len},
          {"effective_budget", kv.effective_budget},
          {"penalized_evicted", kv.penalized_evicted}};
}

}  // namespace

PromptStyle PairPromptStyle(const SweepConfig& c, const MethodPreset& pair) {
  if (!pair.prompt || c.prompt_given || c.dataset.plain_prompt || c.dataset.code) return c.prompt;
  return *pair.prompt;
}

StatusOr<std::vector<int32_t>> SweepPromptTokens(const SweepConfig& c, const Engine& engine,
                                                 const MethodPreset& pair, const Problem& problem) {
  const PromptStyle style = PairPromptStyle(c, pair);
  return engine.Tokenize(RequestText(c, style, problem), true, PromptStyleUsesChat(style));
}

int64_t GenerationLimit(const SweepConfig& c, const MethodPreset& pair, int64_t prompt_len) {
  const int64_t total = pair.max_length > 0 && !c.max_gen_given ? pair.max_length : c.max_gen;
  if (!pair.max_length_counts_prompt) return total;
  return std::max<int64_t>(1, total - prompt_len);
}

StatusOr<nlohmann::json> RunFingerprint(const SweepConfig& c, const Engine& engine) {
  SKIPKV_ASSIGN_OR_RETURN(std::string model_digest, ContentDigest(c.model_path));
  SKIPKV_ASSIGN_OR_RETURN(std::string dataset_digest, ContentDigest(c.dataset.path));
  const ModelInfo& info = engine.info();
  const EngineOptions& eo = engine.options();
  // The steering vectors' contents (absent when no method steers, so the
  // rows of runs without steering keep their fingerprint).
  nlohmann::json steer_digests = nlohmann::json::object();
  for (const MethodPreset& p : c.pairs) {
    const SteeringConfig& st = p.method.steer;
    if (!st.enabled || steer_digests.contains(st.file)) continue;
    SKIPKV_ASSIGN_OR_RETURN(std::string d, ContentDigest(st.file));
    steer_digests[st.file] = d;
  }
  for (const std::string& file : c.provenance_steer_files) {
    if (steer_digests.contains(file)) continue;
    SKIPKV_ASSIGN_OR_RETURN(std::string d, ContentDigest(file));
    steer_digests[file] = d;
  }
  nlohmann::json run = {
      {"dataset", c.dataset.name},
      {"dataset_digest", dataset_digest},
      {"fields",
       {{"question", c.dataset.question_field},
        {"answer", c.dataset.answer_field},
        {"id", c.dataset.id_field}}},
      {"model", info.name},
      {"model_digest", model_digest},
      {"architecture", info.architecture},
      {"tokenizer", eo.tokenizer_path.empty() ? "(from the model)" : eo.tokenizer_path},
      {"chat_template", PromptStyleUsesChat(c.prompt) ? info.chat_template : "raw"},
      {"prompt", PromptStyleName(c.prompt)},
      {"max_gen", c.max_gen},
      {"samples", c.samples},
      {"sampling",
       {{"temperature", c.sampling.temperature},
        {"top_k", c.sampling.top_k},
        {"top_p", c.sampling.top_p},
        {"min_p", c.sampling.min_p},
        {"seed", c.sampling.seed}}},
      {"kv_type", eo.kv_type == KvDType::kF16 ? "f16" : "f32"},
      {"pad_policy", eo.kv.pad_policy == PadPolicy::kPadded ? "padded" : "ragged"},
      {"batch_size", c.batch_size},
      {"n_ctx", info.context_length},
      {"commit", SourceCommit()},
  };
  if (!steer_digests.empty()) run["steer_digests"] = steer_digests;
  if (c.dataset.code) {
    // What decides a code row's verdict (--grade-jobs does not).
    const SandboxLimits& l = c.code_grading.limits;
    run["code_grading"] = {{"prompt", "lcb-deepseekcode"},
                           {"wall_seconds", l.wall_seconds},
                           {"cpu_seconds", l.cpu_seconds},
                           {"memory_bytes", l.memory_bytes},
                           {"processes", l.processes},
                           {"file_bytes", l.file_bytes},
                           {"output_bytes", l.output_bytes}};
  }
  return run;
}

StatusOr<SweepResult> RunSweep(const SweepConfig& c, Engine& engine, const SweepProgressCallback& progress) {
  if (c.max_gen < 1) return InvalidArgument("max_gen (" + std::to_string(c.max_gen) + ") must be >= 1");
  if (c.samples < 1) return InvalidArgument("samples (" + std::to_string(c.samples) + ") must be >= 1");
  if (c.batch_size < 1)
    return InvalidArgument("batch_size (" + std::to_string(c.batch_size) + ") must be >= 1");
  if (c.pairs.empty()) return InvalidArgument("no methods to run");
  if (c.dataset.code && c.sandbox == nullptr)
    return InvalidArgument("dataset '" + c.dataset.name + "' is code: grading needs a sandbox");
  const bool padded = engine.options().kv.pad_policy == PadPolicy::kPadded;
  if (padded && engine.options().sort_by_length)
    return InvalidArgument("a padded sweep needs an engine with sort_by_length = false (the sweep groups)");
  SKIPKV_ASSIGN_OR_RETURN(nlohmann::json run, RunFingerprint(c, engine));
  // The writer first: its lock keeps a second run of the same file from
  // reading the rows and then redoing those this run is about to write.
  SKIPKV_ASSIGN_OR_RETURN(auto writer, ResultsWriter::Open(c.output));
  // Resume: rows already in the file (same run configuration). A method's
  // configuration depends on the budget, so it is checked per row below.
  SKIPKV_ASSIGN_OR_RETURN(auto finished, ReadFinishedRows(c.output, run, {}));

  // The pairs with the prompt style and total length their rows use (the
  // method_config shows them).
  std::vector<MethodPreset> pairs = c.pairs;
  for (MethodPreset& p : pairs) {
    if (p.prompt) p.prompt = PairPromptStyle(c, p);
    if (p.max_length > 0 && c.max_gen_given) p.max_length = c.max_gen;
  }
  // The prompt ids per (style, problem), tokenized once: the requests carry
  // them, grouping sorts by their length and max_length_counts_prompt
  // subtracts it.
  std::map<std::pair<PromptStyle, size_t>, std::vector<int32_t>> prompt_ids;
  auto ids_of = [&](const MethodPreset& pair, size_t problem) -> StatusOr<const std::vector<int32_t>*> {
    const auto key = std::make_pair(PairPromptStyle(c, pair), problem);
    auto it = prompt_ids.find(key);
    if (it == prompt_ids.end()) {
      SKIPKV_ASSIGN_OR_RETURN(auto ids, SweepPromptTokens(c, engine, pair, c.problems[problem]));
      it = prompt_ids.emplace(key, std::move(ids)).first;
    }
    return &it->second;
  };
  std::vector<size_t> shard_problems;
  for (size_t i = 0; i < c.problems.size(); ++i)
    if (c.shard.Contains(i)) shard_problems.push_back(i);

  SweepResult result;
  SweepProgress prog;
  std::vector<Item> pending;
  for (size_t pi = 0; pi < pairs.size(); ++pi) {
    const MethodPreset& pair = pairs[pi];
    const nlohmann::json mj = nlohmann::json::parse(PresetJson(pair));
    std::vector<size_t> order = shard_problems;
    if (pair.grouping) {
      // By the prompt length of this pair's style (stable: dataset order among equals).
      std::vector<int64_t> len(c.problems.size(), 0);
      for (size_t i : order) {
        SKIPKV_ASSIGN_OR_RETURN(const std::vector<int32_t>* ids, ids_of(pair, i));
        len[i] = static_cast<int64_t>(ids->size());
      }
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len[a] < len[b]; });
    }
    auto& acc = prog.accuracy[PairLabel(pair)];
    for (size_t prob : order) {
      for (int k = 0; k < c.samples; ++k) {
        Item it{pi, prob, k, RowKey{c.problems[prob].id, pair.method.name, PairBudget(pair), k}};
        auto f = finished.find(it.key);
        if (f != finished.end()) {
          const auto cit = f->second.find("method_config");
          const std::string d = cit == f->second.end() ? "(missing)" : FirstDifference(*cit, mj);
          if (!d.empty())
            return InvalidArgument(c.output + ": " + it.key.ToString() +
                                   " ran with another method configuration (field '" + d +
                                   "'); give the changed method another label (LABEL=PRESET)");
          ++result.resumed;
          ++acc.second;
          acc.first += f->second.value("correct", false);
          result.rows.push_back(f->second);
          continue;
        }
        pending.push_back(std::move(it));
      }
    }
  }
  prog.total = static_cast<int64_t>(pending.size());
  prog.resumed = result.resumed;
  if (progress) progress(prog);
  if (pending.empty()) return result;

  const auto start = std::chrono::steady_clock::now();
  size_t pos = 0;
  while (pos < pending.size()) {
    // One Generate call: up to batch_size items; padded mode stays within one pair.
    size_t end = pos;
    while (end < pending.size() && end - pos < static_cast<size_t>(c.batch_size) &&
           (!padded || pending[end].pair == pending[pos].pair))
      ++end;
    std::vector<Request> requests;
    std::vector<uint64_t> seeds;
    std::vector<int64_t> limits;  // max_new_tokens per request
    int64_t longest = 0;          // padded: every row of the call is padded to it
    for (size_t i = pos; i < end; ++i) {
      const Item& it = pending[i];
      const MethodPreset& pair = pairs[it.pair];
      SKIPKV_ASSIGN_OR_RETURN(const std::vector<int32_t>* ids, ids_of(pair, it.problem));
      longest = std::max<int64_t>(longest, static_cast<int64_t>(ids->size()));
      Request r;
      r.prompt_tokens = *ids;
      r.sampling = c.sampling;
      r.sampling.seed = SampleSeed(c.sampling.seed, it.key.problem, it.sample);
      seeds.push_back(r.sampling.seed);
      r.method = pair.method;
      requests.push_back(std::move(r));
    }
    for (size_t i = pos; i < end; ++i) {
      Request& r = requests[i - pos];
      const int64_t len = padded ? longest : static_cast<int64_t>(r.prompt_tokens.size());
      limits.push_back(GenerationLimit(c, pairs[pending[i].pair], len));
      r.max_new_tokens = static_cast<int>(limits.back());
    }
    // Each row is graded, appended and flushed as soon as its sequence
    // finishes (Engine's on_finished), so a kill mid-batch keeps the rows of
    // the batch's finished samples. A failed write cancels the rest of the
    // call (the token callback returns false) and is returned.
    const size_t batch_requests = requests.size();
    Status write_status = Status::Ok();
    auto on_finished = [&](const GenerationResult& g) {
      if (!write_status.ok()) return;
      const Item& it = pending[pos + g.index];
      const Problem& prob = c.problems[it.problem];
      const MethodPreset& pair = pairs[it.pair];
      std::string extracted;
      bool correct = false;
      nlohmann::json code_grade;
      if (c.dataset.code) {
        // The tests are reloaded per sample (a release's tests would not fit in memory).
        auto code = LoadLcbRowAt(c.dataset.path, prob.offset, prob.line);
        if (!code.ok()) {
          write_status = code.status();
          return;
        }
        extracted = ExtractCode(g.text);
        const CodeVerdict v = GradeProgram(*c.sandbox, extracted, *code, c.code_grading);
        correct = v.equal;
        code_grade = v.ToJson();
      } else {
        extracted = ExtractAnswer(g.text);
        correct = MathEqual(extracted, prob.reference);
      }
      nlohmann::json diag = nlohmann::json::object();
      for (const auto& [name, v] : g.diagnostics) diag[name] = v;
      nlohmann::json row = {
          {"problem", it.key.problem},
          {"method", it.key.method},
          {"budget", it.key.budget},
          {"sample", it.sample},
          {"line", prob.line},
          {"dataset", c.dataset.name},
          {"correct", correct},
          {"extracted", extracted},
          {"reference", prob.reference},
          {"output", g.text},
          {"finish", FinishReasonName(g.finish)},
          {"prompt_tokens", g.prompt_tokens.size()},
          {"output_tokens", g.tokens.size()},
          {"max_new_tokens", limits[g.index]},
          {"seed", seeds[g.index]},
          {"timings",
           {{"queue_ms", g.timings.queue_ms},
            {"prefill_ms", g.timings.prefill_ms},
            {"decode_ms", g.timings.decode_ms},
            {"total_ms", g.timings.total_ms},
            {"decode_tokens_per_s", g.timings.decode_tokens_per_s},
            {"batch_requests", batch_requests}}},
          {"kv", KvJson(g.kv)},
          {"diagnostics", diag},
          {"method_config", nlohmann::json::parse(PresetJson(pair))},
          {"method_ran", nlohmann::json::parse(MethodJson(g.method))},
          {"run", run},
      };
      if (c.dataset.code) row["code_grade"] = std::move(code_grade);
      write_status = writer->Append(row);
      if (!write_status.ok()) return;
      auto& acc = prog.accuracy[PairLabel(pair)];
      ++acc.second;
      acc.first += correct;
      ++result.generated;
      result.rows.push_back(std::move(row));
      ++prog.done;
      prog.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (progress) progress(prog);
    };
    auto on_token = [&](const TokenEvent&) { return write_status.ok(); };
    StatusOr<std::vector<GenerationResult>> results = engine.Generate(requests, on_token, on_finished);
    SKIPKV_RETURN_IF_ERROR(write_status);
    if (!results.ok()) return results.status();
    pos = end;
  }
  return result;
}

}  // namespace skipkv::eval
