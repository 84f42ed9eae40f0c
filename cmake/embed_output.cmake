# Script-mode helpers that embed_text.cmake and embed_sql.cmake share.

# Fails the build when `text` (read from `file`) holds `delimiter`, which
# would end the raw string it is embedded in.
function(aqs_refuse_delimiter file text delimiter)
  string(FIND "${text}" "${delimiter}" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw-string delimiter ${delimiter}")
  endif()
endfunction()

# Writes `content` to `output` unless it already holds exactly that, so
# that an unchanged source is not compiled again.
function(aqs_write_if_changed output content)
  if(EXISTS "${output}")
    file(READ "${output}" old)
  else()
    set(old "")
  endif()
  if(NOT old STREQUAL content)
    file(WRITE "${output}" "${content}")
  endif()
endfunction()
