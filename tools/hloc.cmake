# tools/hloc.cmake: use hloc from a CMake build.
#
#   find_package(hloc CONFIG REQUIRED)      # an installed hloc (cmake --install), or
#   include(path/to/hloc/tools/hloc.cmake)   # from a checkout
#   hloc_add_model(mlp_model model.pb NAME mlp)        # -> library target mlp_model
#   target_link_libraries(my_app PRIVATE mlp_model)      # adds the object, model.h's folder, -lm
#
# hloc_add_model(<target> <model.pb|model.hlo>
#                [NAME <symbol prefix>]      default: <target>
#                [CPU <cpu>] [FEATURES <llvm features>] [OPT <0..3>]
#                [FREEZE <ARG=file.npy> ...] [FLAGS <more hloc flags> ...]
#                [HLOC <path to hloc>])      default: the `hloc` target of this build, the
#                                            hloc::hloc of find_package(hloc), or the hloc
#                                            found on PATH
# The object and header are generated at build time into
# ${CMAKE_CURRENT_BINARY_DIR}/hloc/<target>/, and rebuilt when the model or hloc changes.
function(hloc_add_model target model)
  cmake_parse_arguments(H "" "NAME;CPU;FEATURES;OPT;HLOC" "FREEZE;FLAGS" ${ARGN})
  if(NOT H_NAME)
    set(H_NAME ${target})
  endif()
  get_filename_component(model "${model}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/hloc/${target}")
  set(obj "${dir}/${H_NAME}.o")
  set(hdr "${dir}/${H_NAME}.h")
  if(H_HLOC)
    set(hloc "${H_HLOC}")
    set(hloc_dep "${H_HLOC}")
  elseif(TARGET hloc)
    set(hloc "$<TARGET_FILE:hloc>")
    set(hloc_dep hloc)
  elseif(TARGET hloc::hloc) # find_package(hloc): the installed compiler
    set(hloc "$<TARGET_FILE:hloc::hloc>")
    set(hloc_dep "$<TARGET_FILE:hloc::hloc>")
  else()
    find_program(HLOC_EXECUTABLE hloc REQUIRED)
    set(hloc "${HLOC_EXECUTABLE}")
    set(hloc_dep "${HLOC_EXECUTABLE}")
  endif()
  set(args "${model}" -o "${obj}" --header "${hdr}" --name "${H_NAME}")
  if(H_CPU)
    list(APPEND args --cpu "${H_CPU}")
  endif()
  if(H_FEATURES)
    list(APPEND args --features "${H_FEATURES}")
  endif()
  if(DEFINED H_OPT)
    list(APPEND args "-O${H_OPT}")
  endif()
  foreach(f ${H_FREEZE})
    list(APPEND args --freeze "${f}")
    string(REGEX REPLACE "^[^=]*=" "" npy "${f}")
    get_filename_component(npy "${npy}" ABSOLUTE)
    list(APPEND deps "${npy}")
  endforeach()
  list(APPEND args ${H_FLAGS})
  file(MAKE_DIRECTORY "${dir}")
  add_custom_command(
    OUTPUT "${obj}" "${hdr}"
    COMMAND ${hloc} ${args}
    DEPENDS "${model}" ${hloc_dep} ${deps}
    COMMENT "hloc ${model} -> ${H_NAME}.o"
    VERBATIM)
  set_source_files_properties("${obj}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${target} STATIC "${obj}" "${hdr}")
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(${target} INTERFACE "${dir}")
  target_link_libraries(${target} INTERFACE m)
endfunction()
