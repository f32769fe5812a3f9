#include "kv/policies/registry.h"
#include "skipkv/sequence_hooks.h"
