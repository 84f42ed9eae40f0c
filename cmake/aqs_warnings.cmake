# aqs_set_warnings(target): the project's warning flags, errors when AQS_WERROR.
function(aqs_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  # GCC 12 at -O3 reports impossible overlaps in std::string concatenation
  # (GCC PR 105329): a false positive that would fail Release builds.
  target_compile_options(${target} PRIVATE
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)
  if(AQS_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
