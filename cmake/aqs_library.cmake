# aqs_add_library(<name> [STATIC|SHARED] [ALIAS <alias>] SOURCES <file>...
#                 [INCLUDE <dir>...] [PUBLIC <item>...] [PRIVATE <item>...])
# One of AQS's libraries, the same way everywhere: add_library (STATIC unless
# SHARED), the alias its users link (aqs::<part>), INCLUDE as its public
# include directories, PUBLIC and PRIVATE as its target_link_libraries, C++20
# required of it and of its users, and the project's warnings
# (aqs_set_warnings). Anything else a library needs follows the call.
function(aqs_add_library name)
  cmake_parse_arguments(L "STATIC;SHARED" "ALIAS" "SOURCES;INCLUDE;PUBLIC;PRIVATE" ${ARGN})
  if(L_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "aqs_add_library(${name}): unknown arguments ${L_UNPARSED_ARGUMENTS}")
  endif()
  if(L_SHARED)
    add_library(${name} SHARED ${L_SOURCES})
  else()
    add_library(${name} STATIC ${L_SOURCES})
  endif()
  if(L_ALIAS)
    add_library(${L_ALIAS} ALIAS ${name})
  endif()
  if(L_INCLUDE)
    target_include_directories(${name} PUBLIC ${L_INCLUDE})
  endif()
  if(L_PUBLIC OR L_PRIVATE)
    target_link_libraries(${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
  endif()
  target_compile_features(${name} PUBLIC cxx_std_20)
  aqs_set_warnings(${name})
endfunction()
