// kv core reaching a policy header next to it, without the layer path
#include "policies/registry.h"
