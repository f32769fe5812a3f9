#include "skipkv/engine.h"
#include "hwy/highway.h"
