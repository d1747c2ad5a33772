# Precompiled headers: the standard library (and, where a target uses them, GoogleTest, CLI11 and
# nlohmann/json) parsed once a target instead of once a source. Every source of the project
# preprocesses to about 100,000 lines, nearly all of it those headers; a test source compiles in
# about three quarters of its time with them precompiled, a sanitizer build's in about two thirds.
# The code compiled is the same: the headers are included before a source's own, and every source
# still includes what it uses (a DUET_PCH=OFF build checks that).
option(DUET_PCH "Precompile the standard and third-party headers of the big targets" ON)

set(DUET_PCH_STD <algorithm> <array> <atomic> <chrono> <cmath> <cstdint> <cstdio> <cstdlib>
  <cstring> <filesystem> <fstream> <functional> <limits> <map> <memory> <mutex> <optional> <set>
  <span> <sstream> <string> <string_view> <thread> <unordered_map> <utility> <variant> <vector>)

# duet_pch(TARGET [HEADERS h...] [REUSE_FROM OTHER]): TARGET's C++ sources start with the standard
# headers and HEADERS precompiled, or with OTHER's precompiled header (OTHER compiled with the
# same flags). Call it after the target's sources and their properties are set: a source with
# flags or definitions of its own (an ISA's kernels, a file at another optimisation level)
# compiles without, since a precompiled header only serves the flags it was made with.
function(duet_pch target)
  if(NOT DUET_PCH)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 p "" "REUSE_FROM" "HEADERS")
  if(p_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${p_REUSE_FROM})
  else()
    # The headers through a file of includes: a generator expression (C++ only, not the C or
    # CUDA sources) cannot hold the angle brackets of <vector>.
    set(content "")
    foreach(header IN LISTS DUET_PCH_STD p_HEADERS)
      string(APPEND content "#include ${header}\n")
    endforeach()
    set(file "${CMAKE_BINARY_DIR}/duet_pch/${target}.h")
    file(CONFIGURE OUTPUT "${file}" CONTENT "${content}" @ONLY)
    target_precompile_headers(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${file}>")
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(source IN LISTS sources)
    if(source MATCHES "^\\$<")
      continue()
    endif()
    get_source_file_property(options "${source}" DIRECTORY "${dir}" COMPILE_OPTIONS)
    get_source_file_property(definitions "${source}" DIRECTORY "${dir}" COMPILE_DEFINITIONS)
    if(options OR definitions)
      set_source_files_properties("${source}" DIRECTORY "${dir}" PROPERTIES
        SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
