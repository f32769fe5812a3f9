// A tool that is internal by nature.
// Internal tool: it reads files below the public API.
#include "util/status.h"
#include "model/x.h"
