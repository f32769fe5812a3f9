#include "skipkv/sequence_hooks.h"
