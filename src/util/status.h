// Status and StatusOr<T> are part of the public API: their definition is
// include/skipkv/status.h (exported by skipkv_util as "skipkv/status.h").
// This header keeps the internal spelling working.
#pragma once

#include "skipkv/status.h"
