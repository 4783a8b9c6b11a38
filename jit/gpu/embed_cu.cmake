# Writes one of jit/gpu/'s .cu files into a generated C++ header as a constant, so that the CUDA C
# that NVRTC and hiprtc compile at run time is edited as CUDA rather than inside a C++ string. Run
# at build time by the custom commands of jit/CMakeLists.txt (again whenever the .cu file changes):
#   cmake -DCU=gpu/gpu_ops.cu -DHEADER=generated/jit/gpu/gpu_ops_cu.h -DVARIABLE=kGpuOpsCu \
#         -P embed_cu.cmake
# The constant holds the file after its opening comment (its first lines, each starting with //,
# and the empty line that ends them) byte for byte, as a raw string: the comment tells a reader of
# the .cu file what it is, and the compilers never saw it.
foreach(arg CU HEADER VARIABLE)
  if(NOT DEFINED ${arg})
    message(FATAL_ERROR "embed_cu.cmake: -D${arg}=... is missing")
  endif()
endforeach()

file(READ "${CU}" text)
string(REGEX MATCH "^(//[^\n]*\n)+\n" opening "${text}")
if(opening STREQUAL "")
  message(FATAL_ERROR "${CU}: no opening comment to leave out (lines starting with //, then an "
                      "empty line): the text embedded would not be the file's")
endif()
string(LENGTH "${opening}" skip)
string(SUBSTRING "${text}" ${skip} -1 source)
# The raw string ends at the first )disc_cu" in it.
string(FIND "${source}" ")disc_cu\"" end)
if(NOT end EQUAL -1)
  message(FATAL_ERROR "${CU}: holds )disc_cu\", which would end the raw string early")
endif()

get_filename_component(cu_name "${CU}" NAME)
file(WRITE "${HEADER}" "\
// Generated from jit/gpu/${cu_name} by jit/gpu/embed_cu.cmake: edit that file, not this one.
#pragma once

namespace disc::jit {

inline constexpr const char ${VARIABLE}[] = R\"disc_cu(${source})disc_cu\";

}  // namespace disc::jit
")
