#include "kv/kv_policy.h"
