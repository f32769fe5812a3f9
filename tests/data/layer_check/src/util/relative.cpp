// util reaching up with a relative path
#include "../engine/engine_impl.h"
