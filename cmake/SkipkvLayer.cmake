# skipkv_add_layer(<name> [DEPS <targets>...] [PUBLIC_DEPS <targets>...])
# Builds the static library skipkv_<name> from every .cpp under the current
# directory (recursively) and exports only that layer's headers (see
# skipkv_export_headers). PUBLIC_DEPS are the layers whose headers this
# layer's headers include; DEPS are implementation details (.cpp only).
# Link dependencies only downward (docs/architecture.md, "Layers"). The
# library waits for the layer check (skipkv_layer_check, root CMakeLists.txt).
function(skipkv_add_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS;PUBLIC_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(skipkv_${name} STATIC ${srcs})
  skipkv_export_headers(skipkv_${name} ${name} ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(skipkv_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
  add_dependencies(skipkv_${name} skipkv_layer_check)  # the layer check is a build step
endfunction()

# skipkv_export_headers(<target> <path> <source>)
# Headers are included relative to src/ ("io/gguf.h"), but src/ itself is on
# no include path: each target gets its own directory
# <build>/layer_include/<target>/ in which <path> is a symbolic link to
# <source> (a layer's directory, or one header), added as a PUBLIC include
# directory. So "io/gguf.h" resolves only in targets that link skipkv_io,
# directly or through PUBLIC links, and a layer that includes a header of a
# layer it does not link fails to compile. May be called several times.
function(skipkv_export_headers target path source)
  set(root ${PROJECT_BINARY_DIR}/layer_include/${target})
  get_filename_component(parent ${root}/${path} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${source} ${root}/${path} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
endfunction()
