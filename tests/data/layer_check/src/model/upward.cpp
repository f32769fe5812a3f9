// model: allowed below, one include upward
#include "util/status.h"
#include "kv/kv_cache.h"
#include "engine/engine_impl.h"
