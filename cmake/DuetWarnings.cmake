# Warnings for the project's own targets (not for third-party headers).
function(duet_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wno-missing-field-initializers
      -Wno-restrict>)  # GCC 12 false positives in std::string concatenation
endfunction()
