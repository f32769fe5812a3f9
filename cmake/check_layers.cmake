# Checks that every #include in src/, include/ and apps/ follows the layer
# order (docs/architecture.md, "Layers"): a file may include headers of its
# own layer and of layers below it, never above.
#   cmake -DROOT=<source tree> -P cmake/check_layers.cmake
# Prints one line per offending include ("<file>:<line>: ...") and exits
# non-zero when there is any; registered as the CTest test layers.check
# (label unit), with a self-test on a tree that breaks the rules on purpose
# (tests/data/layer_check).
#
# A file's layer is its top directory under src/ (src/io/gguf.h -> io),
# with two finer cuts inside kv/: kv/kv_cache.* is kv_storage (the slots the
# forward pass writes, below model) and kv/policies/ is kv_policies (only the
# policies and their registry see each other, above the rest of kv).
# include/skipkv/ (the public API) belongs to engine, except the headers in
# `public_layers` (interfaces that lower layers implement), and apps/ is apps.
# An include "x/..." is checked when src/x exists; others (system headers,
# "hwy/...", files of the same directory without a slash) are not. A
# directory of src/ missing from the order is an error, so a new layer is
# placed on purpose.
#
# Apps sit on the public API (issue 15 item 5): a file under apps/ may include
# include/skipkv/ ("skipkv/..."), its own directory's headers and the layers
# above the engine (eval, serve: libraries that are themselves clients of the
# public API), but no header of the engine or a layer below it ("io/...",
# "engine/...", ...) unless it is a tool that is internal by nature and says
# so: a comment line starting with "// Internal tool:" before its first
# #include (convert, make-model, inspect, tokenize, steer-extract).
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_layers.cmake")
endif()

set(order util tensor io tokenizer kernels kv_storage model kv kv_policies sentence steer methods engine eval serve apps)
# Apps may include layers above this one without the internal-tool marker.
set(public_api_layer engine)
set(internal_marker "// Internal tool:")
# Public headers below engine (self-contained, implemented by a lower layer):
# status.h and types.h (Status, small enums) are util's, kv_config.h
# (KvPolicyConfig) is kv's, steering.h (SteeringConfig) is steer's, and the
# method configuration, its parameters and the preset registry are the
# methods layer's.
set(public_layers "status.h=util" "types.h=util" "kv_config.h=kv" "steering.h=steer" "method.h=methods"
    "method_args.h=methods" "presets.h=methods")

# Sets ${out} to the layer of a public header "skipkv/<name>".
function(layer_of_public_header name out)
  set(layer engine)
  foreach(entry ${public_layers})
    if(entry MATCHES "^([^=]+)=(.+)$" AND name STREQUAL CMAKE_MATCH_1)
      set(layer ${CMAKE_MATCH_2})
    endif()
  endforeach()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

# Sets ${out} to the layer of a path relative to ROOT/src (or "" if none).
function(layer_of_src_path rel out)
  if(rel MATCHES "^kv/kv_cache\\.")
    set(${out} kv_storage PARENT_SCOPE)
  elseif(rel MATCHES "^kv/policies/")
    set(${out} kv_policies PARENT_SCOPE)
  elseif(rel MATCHES "^([^/]+)/")
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

string(REPLACE ";" " -> " order_text "${order}")
set(errors "")
set(n_errors 0)

# Every directory of src/ must have a place in the order.
file(GLOB top_dirs LIST_DIRECTORIES true RELATIVE ${ROOT}/src ${ROOT}/src/*)
foreach(d ${top_dirs})
  if(IS_DIRECTORY ${ROOT}/src/${d} AND NOT d IN_LIST order)
    string(APPEND errors "src/${d}/: directory not in the layer order (${order_text}); add it to cmake/check_layers.cmake and docs/architecture.md\n")
    math(EXPR n_errors "${n_errors} + 1")
  endif()
endforeach()

file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/src/*.h ${ROOT}/src/*.cpp ${ROOT}/include/*.h
     ${ROOT}/apps/*.h ${ROOT}/apps/*.cpp)
list(SORT files)
foreach(f ${files})
  if(f MATCHES "^src/(.*)$")
    layer_of_src_path("${CMAKE_MATCH_1}" own)
  elseif(f MATCHES "^include/skipkv/(.*)$")
    layer_of_public_header("${CMAKE_MATCH_1}" own)
  elseif(f MATCHES "^include/")
    set(own engine)
  else()
    set(own apps)
  endif()
  list(FIND order "${own}" own_rank)
  if(own_rank LESS 0)
    continue()  # reported above as a directory outside the order
  endif()
  # apps/: internal tools say so before their first #include.
  set(internal_tool FALSE)
  if(own STREQUAL "apps")
    file(READ ${ROOT}/${f} head)
    string(FIND "${head}" "#include" first_include)
    if(first_include GREATER 0)
      string(SUBSTRING "${head}" 0 ${first_include} head)
    endif()
    string(FIND "${head}" "\n${internal_marker}" marker_pos)
    string(FIND "${head}" "${internal_marker}" marker_start)
    if(marker_pos GREATER_EQUAL 0 OR marker_start EQUAL 0)
      set(internal_tool TRUE)
    endif()
  endif()
  # One list element per line: ';' and brackets would split or join CMake
  # list elements, so they are neutralised first (line numbers stay exact).
  file(READ ${ROOT}/${f} text)
  string(REGEX REPLACE "[][;\\]" "_" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(lineno 0)
  foreach(line IN LISTS lines)
    math(EXPR lineno "${lineno} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      continue()
    endif()
    set(inc ${CMAKE_MATCH_1})
    if(inc MATCHES "^skipkv/(.*)$")
      layer_of_public_header("${CMAKE_MATCH_1}" dep)
    elseif(inc MATCHES "^([^/]+)/" AND IS_DIRECTORY ${ROOT}/src/${CMAKE_MATCH_1})
      layer_of_src_path("${inc}" dep)
    else()
      continue()
    endif()
    list(FIND order "${dep}" dep_rank)
    if(dep_rank GREATER own_rank)
      string(APPEND errors "${f}:${lineno}: includes \"${inc}\": layer ${own} may not include layer ${dep} (above it)\n")
      math(EXPR n_errors "${n_errors} + 1")
    elseif(own STREQUAL "apps" AND NOT internal_tool AND NOT inc MATCHES "^skipkv/")
      list(FIND order "${public_api_layer}" api_rank)
      if(dep_rank GREATER_EQUAL 0 AND dep_rank LESS_EQUAL api_rank)
        string(APPEND errors "${f}:${lineno}: includes \"${inc}\": an app uses the public API (include/skipkv/) and the layers above ${public_api_layer}, not layer ${dep}; a tool that is internal by nature says so in a line \"${internal_marker} <why>\" before its includes\n")
        math(EXPR n_errors "${n_errors} + 1")
      endif()
    endif()
  endforeach()
endforeach()

if(n_errors GREATER 0)
  message("${errors}layer order: ${order_text}")
  message(FATAL_ERROR "layer check failed: ${n_errors} problem(s)")
endif()
list(LENGTH files n_files)
message("layer check: ${n_files} files follow the layer order")
