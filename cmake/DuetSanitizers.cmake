# Sanitizer builds: the library, the tools and the tests are all compiled with the sanitizers,
# so that every allocation and every access duet makes is checked, not only the tests' own.
#
# DUET_SANITIZE: OFF, ON (AddressSanitizer with LeakSanitizer, and UndefinedBehaviorSanitizer:
# the debug presets), or the list -fsanitize= takes, e.g. "thread".
set(DUET_SANITIZE OFF CACHE STRING
  "Sanitizers for the whole build: OFF, ON (address,undefined) or a -fsanitize= list")

set(DUET_SANITIZERS "")
if(DUET_SANITIZE MATCHES "^(ON|On|on|TRUE|True|true|YES|Yes|yes|1)$")
  set(DUET_SANITIZERS "address,undefined")
elseif(NOT DUET_SANITIZE MATCHES "^(OFF|Off|off|FALSE|False|false|NO|No|no|0|)$")
  set(DUET_SANITIZERS "${DUET_SANITIZE}")
endif()

if(DUET_SANITIZERS)
  set(_duet_san_flags -fsanitize=${DUET_SANITIZERS} -fno-omit-frame-pointer)
  if(DUET_SANITIZERS MATCHES "undefined")
    list(APPEND _duet_san_flags -fno-sanitize-recover=undefined)
  endif()
  # C and C++ only: nvcc takes no -fsanitize (device code cannot be sanitized anyway).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_duet_san_flags}>")
  add_link_options(-fsanitize=${DUET_SANITIZERS})

  # Every executable of the build keeps shared libraries loaded until it exits (see the source).
  add_library(duet_keep_libraries_loaded OBJECT
    ${CMAKE_CURRENT_LIST_DIR}/sanitizers/keep_libraries_loaded.cpp)
endif()

# Links the sanitizer support into an executable of a sanitizer build; nothing otherwise.
function(duet_sanitizer_runtime target)
  if(DUET_SANITIZERS)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:duet_keep_libraries_loaded>)
    target_link_options(${target} PRIVATE "LINKER:--export-dynamic-symbol=dlclose")
  endif()
endfunction()

# duet_sanitizer_hot_sources(SOURCES...): compiled at -O1 in a Debug sanitizer build. The CPU
# kernels, the float64 reference and block unpacking run every conformance case; at -O0 they took
# most of the sanitizer job's test time. -O1 keeps every sanitizer check (AddressSanitizer's own
# advice for reasonable speed). Call it in the directory that adds the sources.
# With LEVEL -O2 (duet_sanitizer_hot_sources(LEVEL -O2 SOURCES...)): clang's -O1 leaves small
# standard-library calls (std::array's operator[]) out of line under UndefinedBehaviorSanitizer,
# which made the float64 reference's loops 6 times slower than at -O2.
function(duet_sanitizer_hot_sources)
  cmake_parse_arguments(PARSE_ARGV 0 h "" "LEVEL" "")
  if(NOT h_LEVEL)
    set(h_LEVEL -O1)
  endif()
  if(DUET_SANITIZERS AND CMAKE_BUILD_TYPE STREQUAL "Debug")
    set_property(SOURCE ${h_UNPARSED_ARGUMENTS} APPEND PROPERTY COMPILE_OPTIONS ${h_LEVEL})
  endif()
endfunction()

# duet_sanitizer_hot_target(TARGET [LEVEL -O2]): every source of TARGET at -O1 (or LEVEL) in a
# Debug sanitizer build (as above), set on the target so that its precompiled header is made at
# the same level.
function(duet_sanitizer_hot_target target)
  cmake_parse_arguments(PARSE_ARGV 1 h "" "LEVEL" "")
  if(NOT h_LEVEL)
    set(h_LEVEL -O1)
  endif()
  if(DUET_SANITIZERS AND CMAKE_BUILD_TYPE STREQUAL "Debug")
    target_compile_options(${target} PRIVATE ${h_LEVEL})
  endif()
endfunction()

# duet_sanitizer_simd_sources(SOURCES...): the hand-written SIMD kernels (intrinsics, loops the
# optimiser unrolls in full) without UndefinedBehaviorSanitizer's pointer-overflow check, which
# alone was 30 of quant_avx2.cpp's 70 CPU-seconds of compile in the sanitizer build (clang 14,
# -O1; AddressSanitizer alone 25). Every access these sources make is still checked by
# AddressSanitizer and every other UndefinedBehaviorSanitizer check stays on: pointer-overflow
# reports pointer arithmetic that wraps around the address space, which here (offsets within a
# tensor from a valid base) only an out-of-range offset can do, and AddressSanitizer reports the
# access it then makes.
function(duet_sanitizer_simd_sources)
  if(DUET_SANITIZERS MATCHES "undefined")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize=pointer-overflow)
  endif()
endfunction()
