# aqs_add_subdirs(dir...): add_subdirectory for each listed folder that has a
# CMakeLists.txt, so a new part plugs in without editing its parent's file.
function(aqs_add_subdirs)
  foreach(d IN LISTS ARGN)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${d}/CMakeLists.txt)
      add_subdirectory(${d})
    endif()
  endforeach()
endfunction()
