// kv_storage may not see the rest of kv
#include "kv/kv_policy.h"
