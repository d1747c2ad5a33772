# Warnings for the project's own targets (not for third-party headers).
function(duet_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wno-missing-field-initializers>
    # GCC 12 false positives in std::string concatenation (clang has no such warning)
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
endfunction()
