// engine internals
