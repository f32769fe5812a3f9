# Self-test of cmake/check_layers.cmake: on tests/data/layer_check, a tree
# that breaks the layer order in nine known ways, the check must fail and
# report exactly those nine (and nothing about the allowed includes there).
#   cmake -DCHECK=<check_layers.cmake> -DFIXTURE=<tree> -P layer_check_selftest.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${FIXTURE} -P ${CHECK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the layer check passed a tree with upward includes:\n${all}")
endif()
set(expected
    "src/server/: directory not in the layer order"
    "src/kv/kv_cache.h:2: includes \"kv/kv_policy.h\": layer kv_storage may not include layer kv"
    "src/kv/kv_policy.cpp:3: includes \"kv/policies/registry.h\": layer kv may not include layer kv_policies"
    "src/model/upward.cpp:4: includes \"engine/engine_impl.h\": layer model may not include layer engine"
    "src/steer/bad.cpp:3: includes \"skipkv/engine.h\": layer steer may not include layer engine"
    "apps/tool/reaches_in.cpp:3: includes \"util/status.h\": an app uses the public API"
    "src/util/relative.cpp:2: includes \"../engine/engine_impl.h\": an include may not contain \"..\""
    "apps/tool/relative.cpp:3: includes \"../../src/engine/engine_impl.h\": an include may not contain \"..\""
    "src/kv/sneaky.cpp:2: includes \"policies/registry.h\": layer kv may not include layer kv_policies"
    "layer check failed: 9 problem(s)")
foreach(line IN LISTS expected)
  string(FIND "${all}" "${line}" pos)
  if(pos LESS 0)
    message(FATAL_ERROR "missing from the layer check's report: '${line}'\nreport:\n${all}")
  endif()
endforeach()
foreach(allowed src/steer/ok.cpp: apps/tool/main.cpp: apps/tool/internal.cpp: apps/tool/reaches_in.cpp:2: apps/tool/relative.cpp:2: src/engine/engine.cpp: src/kv/policies/registry.h:
                include/skipkv/sequence_hooks.h: include/skipkv/engine.h:)
  string(FIND "${all}" "${allowed}" pos)
  if(pos GREATER_EQUAL 0)
    message(FATAL_ERROR "the layer check flagged an allowed include in ${allowed}:\n${all}")
  endif()
endforeach()
message("layer check self-test: the nine planted problems are reported")
