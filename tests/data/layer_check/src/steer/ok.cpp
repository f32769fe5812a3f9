#include "kv/policies/registry.h"
#include "kv/sequence_hooks.h"
