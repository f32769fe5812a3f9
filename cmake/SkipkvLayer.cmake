# skipkv_add_layer(<name> [DEPS <targets>...] [PUBLIC_DEPS <targets>...])
# Builds the static library skipkv_<name> from every .cpp under the current
# directory (recursively). Headers are included relative to src/, so
# `#include "io/gguf.h"` works everywhere. Link dependencies only downward.
function(skipkv_add_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS;PUBLIC_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT srcs)  # a layer still being written: keep the target graph intact
    set(srcs ${CMAKE_CURRENT_BINARY_DIR}/empty_${name}.cpp)
    file(WRITE ${srcs} "// no sources yet\n")
  endif()
  add_library(skipkv_${name} STATIC ${srcs})
  target_include_directories(skipkv_${name} PUBLIC ${SKIPKV_SRC_DIR}
                                                   ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(skipkv_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
endfunction()
