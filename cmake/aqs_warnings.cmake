# aqs_set_warnings(target): the project's warning flags, errors when AQS_WERROR.
function(aqs_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(AQS_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
