// The public API of skipkv: load a model, generate text for a set of requests
// with a KV cache that stays inside a fixed budget, and measure perplexity.
// Applications (the `skipkv` CLI, the server, evaluation drivers) include only
// include/skipkv/, which is self-contained: its headers include each other
// and the standard library, nothing of src/ (a test compiles each alone).
//
// Error strategy: every function that can fail on user input returns a Status
// (or StatusOr) whose message names the offending value and what was
// expected. Requests are validated as a whole before any model work starts,
// so a bad request never leaves a half-finished run behind.
//
// Threading: an Engine runs one call at a time (Generate / Perplexity are not
// re-entrant); inside a call the forward pass uses the engine's thread pool.
// Results never depend on the number of threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "skipkv/kv_config.h"  // KvPolicyConfig, KnownKvPolicyNames
#include "skipkv/method.h"
#include "skipkv/sampling.h"
#include "skipkv/status.h"
#include "skipkv/types.h"  // FileLoad, KvDType, PadPolicy

namespace skipkv {

// ---- Engine configuration -----------------------------------------------------

struct EngineOptions {
  // A .gguf file, a Hugging Face checkpoint directory or a llama2.c .bin;
  // empty or ":default:" = the embedded stories260K model.
  std::string model_path;
  // llama2.c checkpoints only: tokenizer.bin (empty = look beside the model).
  std::string tokenizer_path;
  int threads = 0;                 // worker threads; 0 = all hardware threads (range: ResolveThreadCount)
  // How the weight files reach memory (skipkv/types.h): kAuto reads them
  // into anonymous memory with huge pages advised when they fit in 3/4 of
  // MemAvailable (decode is faster and steadier: fewer TLB misses), else maps
  // them; kMap always maps (no copy, page cache shared between processes).
  FileLoad weights = FileLoad::kAuto;
  KvDType kv_type = KvDType::kF16; // element type of cached K/V
  // The default method's KV configuration (policy, budget, window, interval,
  // skipkv fields), and the engine-wide pad policy and trace of every method.
  KvPolicyConfig kv;
  // The default method's steering (skipkv/steering.h; disabled by default).
  SteeringConfig steer;
  // Scheduler.
  int n_ubatch = 512;   // prefill: at most this many prompt tokens per sequence per forward
  int n_batch = 2048;   // prefill: at most this many tokens per forward in total (>= n_ubatch)
  // Ragged mode: the most sequences active at once (0 = all requests).
  // Padded mode: the rows of one left-padded batch (0 = all requests).
  int batch_size = 0;
  // Padded mode: group requests into batches by prompt length (a stable
  // argsort, spec §6.3) instead of submission order.
  bool sort_by_length = true;
  // Positions available to a sequence (0 = the model's context length; larger
  // values are an error).
  int64_t n_ctx = 0;
  // Chat template for Request::chat: "auto" (from the vocabulary:
  // DeepSeek-R1-Distill, ChatML, else raw), "r1-distill", "chatml" or "raw"
  // (the prompt as is).
  std::string chat_template = "auto";
  // FullKV methods (policy "full") also run SkipKV's sentence tracker,
  // observation only (no eviction, no change to any token), so their
  // results carry the skipkv.* sentence diagnostics (pair similarity,
  // non-execution share: paper Fig. 14 for FullKV). `skipkv eval` sets it.
  bool observe_sentences = false;
};

// Facts about the loaded model, for logs and reports.
struct ModelInfo {
  std::string name;          // general.name or the path
  std::string path;
  std::string architecture;  // "llama", "qwen2"
  std::string description;   // ModelConfig::ToString()
  int n_layers = 0;
  int64_t d_model = 0;       // residual width (a steering vector's width must equal it)
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int64_t context_length = 0;  // positions the engine allows (EngineOptions::n_ctx or the model's)
  int32_t bos = -1, eos = -1;
  std::string chat_template;   // the template Request::chat uses
};

// ---- Requests and results -------------------------------------------------------

// One message of a conversation (Request::messages).
struct ChatTurn {
  std::string role;  // "system", "user", "assistant" (as the chat template accepts)
  std::string content;
};

struct Request {
  // The prompt: `prompt_tokens` if non-empty (used verbatim), otherwise
  // `prompt` tokenized (BOS added when the tokenizer asks for it; with
  // `chat`, wrapped in the chat template as one user turn after the optional
  // `system` text, plus the generation prompt). An empty prompt without BOS
  // is an error; with BOS it starts from BOS alone (how llama2.c's run.c
  // tells a story).
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  bool chat = false;
  std::string system;
  // With `chat`: a whole conversation, rendered by the chat template with the
  // generation prompt; when non-empty it replaces `prompt` and `system`.
  std::vector<ChatTurn> messages;
  SamplingParams sampling;
  int max_new_tokens = 256;          // >= 1
  std::vector<std::string> stop;     // stop strings, matched on the decoded text (non-empty)
  bool ignore_eos = false;           // keep generating through end-of-generation tokens
  // The method this request runs (skipkv/method.h); unset = the engine's
  // (EngineOptions::kv). Its pad policy and trace are the engine's.
  std::optional<MethodConfig> method;
  // Teacher forcing (skipkv eval fidelity): when non-empty, generated token i
  // is forced_tokens[i] instead of a sampled one — the sampler is not used,
  // end-of-generation ids and stop strings do not end the request — and the
  // request ends (kLength) after min(max_new_tokens, forced_tokens.size())
  // tokens. The KV cache is compressed exactly as in free generation. Ids
  // must lie in the vocabulary.
  std::vector<int32_t> forced_tokens;
};

enum class FinishReason {
  kEos,         // an end-of-generation token was sampled (not part of the text)
  kStopString,  // a stop string appeared (the text ends before it)
  kLength,      // max_new_tokens reached
  kContext,     // the next position would exceed the context
  kCancelled,   // the token callback returned false
};
const char* FinishReasonName(FinishReason r);  // "eos", "stop", "length", "context", "cancelled"

struct GenerationTimings {
  double queue_ms = 0;    // from the start of Generate to this request's first forward
  double prefill_ms = 0;  // wall time of the forwards that carried this request's prompt
  double decode_ms = 0;   // wall time of the forwards that carried its generated tokens
  int64_t prompt_tokens = 0;  // real prompt tokens (pads not counted)
  int64_t decode_steps = 0;   // generated tokens fed back through the model
  double decode_tokens_per_s = 0;  // decode_steps / decode time (0 when none)
  double total_ms = 0;        // from the start of Generate to the request's end
};

// Per-request KV cache figures (K+V rows of all layers; metadata apart).
struct KvStats {
  size_t peak_live_bytes = 0;   // largest live K/V footprint seen
  size_t final_live_bytes = 0;  // at the end of the request
  size_t allocated_bytes = 0;   // K/V capacity allocated for the request
  int64_t peak_slots = 0;       // largest per-layer slot count
  int64_t final_slots = 0;      // slots of layer 0 at the end
  int64_t compressions = 0;     // forwards after which the cache was compacted
  int64_t slots_evicted = 0;    // summed over layers and KV heads
  double compress_ms = 0;       // time spent scoring and compacting
  int64_t pad_len = 0;          // Δpad of the row (padded mode)
  int64_t effective_budget = 0; // real slots a compression keeps (0 for full)
  // Evicted slots (over layers and KV heads) that the method's score penalty
  // covered — SkipKV: slots of redundant sentences — in total and per
  // compression (empty for methods without a penalty).
  int64_t penalized_evicted = 0;
  std::vector<int64_t> penalized_evicted_per_compression;
};

struct GenerationResult {
  size_t index = 0;                    // position of the request in the input span
  std::vector<int32_t> prompt_tokens;  // as fed (no pads)
  // Generated ids: an end-of-generation token that stopped the request is
  // not included; with a stop string, the ids up to and including the one
  // that completed it are.
  std::vector<int32_t> tokens;
  std::string text;                    // decoded generated text, cut before any stop string
  FinishReason finish = FinishReason::kLength;
  std::string stop_string;             // the stop string that ended it (kStopString)
  GenerationTimings timings;
  KvStats kv;
  int64_t batch = 0;                   // padded mode: the batch it ran in (0 in ragged mode)
  // The method that ran (name filled in, engine-wide fields applied).
  MethodConfig method;
  // Method-specific counters: the method's and the app's SequenceHooks
  // (e.g. "skipkv.sentences", "skipkv.redundant_sentences"), if any.
  std::vector<std::pair<std::string, double>> diagnostics;
};

// Called once per generated token (not for a stopping end-of-generation
// token), in generation order per request; events of different requests
// interleave. `text` is the newly final decoded text (may be empty while a
// multi-byte character or a possible stop string is pending). When a request
// ends, text still held back is delivered in one more event with token -1
// (only if non-empty). Return false to cancel the rest of that request
// (finish kCancelled).
struct TokenEvent {
  size_t index;      // request index
  int32_t token;     // -1 for the final flush
  std::string_view text;
};
using TokenCallback = std::function<bool(const TokenEvent&)>;

// Called once per request as soon as it finishes (before Generate returns and
// before the other requests of its batch end), with its complete result
// (index = its position in the input span; text, timings, KV stats and
// diagnostics final). Generate still returns every result. Lets a caller
// persist each finished request at once (skipkv eval appends a row per sample).
using FinishedCallback = std::function<void(const GenerationResult&)>;

// Called with a request's next-token logits each time they are computed
// (after its prompt, then after each fed token), before the next token is
// chosen: step = tokens generated so far (0 = after the prompt). `logits`
// spans the tokenizer's vocabulary and is valid only during the call.
struct LogitsEvent {
  size_t index;  // request index
  int64_t step;
  std::span<const float> logits;
};
using LogitsCallback = std::function<void(const LogitsEvent&)>;

// ---- Perplexity -------------------------------------------------------------------

struct PerplexityOptions {
  int64_t ctx = 512;       // window length; tokens are split into consecutive windows of ctx
  int batch = 4;           // windows evaluated together in one forward
  bool add_bos = true;     // the first token of every window is BOS (llama.cpp convention)
  int64_t max_windows = 0; // 0 = all
};

struct PerplexityProgress {
  int64_t windows_done = 0, windows_total = 0;
  int64_t tokens_scored = 0;
  double ppl_so_far = 0;
  double elapsed_s = 0, eta_s = 0;
};
using PerplexityCallback = std::function<void(const PerplexityProgress&)>;

struct PerplexityResult {
  double ppl = 0;           // exp(mean NLL)
  double mean_nll = 0;      // nats per scored token
  double nll_stddev = 0;    // standard error of mean_nll
  int64_t tokens_scored = 0;
  int64_t windows = 0;
  int64_t text_tokens = 0;  // tokens of the whole text
  double seconds = 0;
  std::vector<double> window_ppl;  // per window
};

// ---- The engine ----------------------------------------------------------------------

class Engine {
 public:
  // Loads the model and tokenizer and checks the options (KV config via
  // ValidateKvPolicyConfig; n_ubatch >= 1; n_batch >= n_ubatch; batch_size
  // >= 0; n_ctx within the model's context). Errors: NotFound / IoError /
  // CorruptData / Unsupported from loading, InvalidArgument for options.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& info() const;
  const EngineOptions& options() const;

  // Checks one request without running it: its method (if set), sampling
  // values, max_new_tokens >= 1, stop strings non-empty, token ids in the vocabulary, and a
  // non-empty prompt that leaves room for at least one generated position.
  // InvalidArgument (OutOfRange for a prompt longer than the context).
  Status ValidateRequest(const Request& request) const;

  // Generates every request and returns results in input order.
  // Ragged mode (default): continuous batching — each step is either prefill
  // chunks of newly admitted sequences or one decode token for every active
  // one; sequences finish independently and free their slot for the next.
  // Padded mode (kv.pad_policy == kPadded): requests are grouped into batches
  // of batch_size (sorted by prompt length when sort_by_length), each batch is
  // left-padded to its longest prompt (pad slots are masked and, under
  // eviction, kept and counted against the budget) and runs to completion.
  // Every request is validated first (ValidateRequest, plus the padded-mode
  // pad-length check); the first failure is returned, naming the request,
  // before any work. on_token, if any, sees every token as produced;
  // on_finished, if any, every result as its request ends; on_logits, if
  // any, every request's next-token logits (LogitsEvent).
  StatusOr<std::vector<GenerationResult>> Generate(std::span<const Request> requests,
                                                   const TokenCallback& on_token = nullptr,
                                                   const FinishedCallback& on_finished = nullptr,
                                                   const LogitsCallback& on_logits = nullptr);

  // Prompt text -> ids as Generate would build them (chat: one user turn in
  // the chat template, which brings its own BOS; add_bos is then ignored).
  StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_bos = true, bool chat = false) const;
  // Ids -> text (control tokens skipped). InvalidArgument for an id outside the vocabulary.
  StatusOr<std::string> Detokenize(std::span<const int32_t> tokens) const;

  // Chunked perplexity of `text`: the tokens are cut into consecutive windows
  // of `ctx`; within each window every token but the first is scored given
  // the ones before it (full KV cache). InvalidArgument for ctx < 2, ctx above
  // the context, batch < 1, or a text shorter than one window.
  StatusOr<PerplexityResult> Perplexity(const std::string& text, const PerplexityOptions& options,
                                        const PerplexityCallback& progress = nullptr);

  class Impl;

 private:
  friend class ServingEngine;  // runs its generation loop on impl_ (skipkv/server_engine.h)
  friend struct EngineInternals;  // src/engine/engine_internals.h: per-request hooks for internal tools and tests
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses "f16" / "f32" (the CLI's --kv-type).
StatusOr<KvDType> ParseKvDType(const std::string& s);
// Parses "ragged" / "padded" (the CLI's --pad-policy).
StatusOr<PadPolicy> ParsePadPolicy(const std::string& s);

}  // namespace skipkv
