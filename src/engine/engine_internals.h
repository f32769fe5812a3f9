// What internal tools and tests may do to an Engine beyond the public API
// (include/skipkv/engine.h): install per-request SequenceHooks
// (kv/sequence_hooks.h), the extension point the methods use internally.
// Not part of the public API: its types are internal.
#pragma once

#include "kv/sequence_hooks.h"
#include "skipkv/engine.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {

struct EngineInternals {
  // Installs the per-request hooks factory used by later Generate calls on
  // `engine` (nullptr removes it). The factory's hooks run after the
  // method's own (SkipKV's sentence tracker, steering).
  static void SetSequenceHooks(Engine& engine, SequenceHooksFactory factory);
  // The engine's tokenizer (e.g. to build SkipKV's token sets for hooks of
  // one's own); valid while the engine lives.
  static const Tokenizer& GetTokenizer(const Engine& engine);
};

}  // namespace skipkv
