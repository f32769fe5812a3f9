// kv core may not see the policies
#include "kv/kv_cache.h"
#include "kv/policies/registry.h"
