# Warnings for the project's own targets (not for third-party headers).
function(duet_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wno-missing-field-initializers>
    # GCC 12 false positives in std::string concatenation (clang has no such warning)
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
endfunction()

# duet_light_optimization(TARGET): TARGET's C++ sources compile at -O1 in optimised builds. For
# code whose time is not the point (options, files, printing, test bodies, benchmark drivers):
# the work it runs, measures or checks is the library's, compiled as the build says. -O1 takes
# about half of -O3's compile time for such code.
function(duet_light_optimization target)
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug>>>:-O1>)
endfunction()
