#include "util/status.h"
