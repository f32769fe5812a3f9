// steer may implement the hooks but not use the engine
int x;
#include "skipkv/engine.h"
