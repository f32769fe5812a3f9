// an app reaching an engine internal with a relative path
#include "skipkv/engine.h"
#include "../../src/engine/engine_impl.h"
