# aqs_embed_text / aqs_embed_sql: the build steps that compile a text file
# (embed_text.cmake) or a folder of numbered SQL migrations (embed_sql.cmake)
# into a C++ source, so the binaries need no source tree at run time. Each
# sets OUT_VAR to the generated source, to be listed among a library's.

# aqs_embed_text(OUT_VAR INPUT NAMESPACE FUNCTION HEADER COMMENT): INPUT's
# text as `std::string_view NAMESPACE::FUNCTION() noexcept` (declared in
# HEADER), in ${CMAKE_CURRENT_BINARY_DIR}/FUNCTION.cpp.
function(aqs_embed_text out_var input namespace function header comment)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${function}.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${out} -DNAMESPACE=${namespace} -DFUNCTION=${function}
            -DHEADER=${header} -P ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake ${PROJECT_SOURCE_DIR}/cmake/embed_output.cmake
    COMMENT "${comment}"
    VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

# aqs_embed_sql(OUT_VAR SQL_DIR NAMESPACE FUNCTION COMMENT): SQL_DIR's
# NNN_name.sql files as `NAMESPACE::FUNCTION()`, the migrations table, in
# ${CMAKE_CURRENT_BINARY_DIR}/generated/FUNCTION.cpp.
function(aqs_embed_sql out_var sql_dir namespace function comment)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/${function}.cpp)
  file(GLOB sql_files CONFIGURE_DEPENDS ${sql_dir}/*.sql)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DSQL_DIR=${sql_dir} -DOUTPUT=${out} -DNAMESPACE=${namespace} -DFUNCTION=${function}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_sql.cmake
    DEPENDS ${sql_files} ${PROJECT_SOURCE_DIR}/cmake/embed_sql.cmake ${PROJECT_SOURCE_DIR}/cmake/embed_output.cmake
    COMMENT "${comment}"
    VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
