// util
