// An app file without the internal-tool marker: its util/ include is reported.
#include "skipkv/engine.h"
#include "util/status.h"
