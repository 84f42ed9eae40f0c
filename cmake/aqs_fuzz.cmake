# AQS_FUZZ: instruments every target for libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, so that the parsers' libraries are covered too,
# and checks up front that the compiler can do it (clang with libFuzzer).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR
    "AQS_FUZZ=ON needs clang (libFuzzer), but the compilers are ${CMAKE_C_COMPILER_ID} and "
    "${CMAKE_CXX_COMPILER_ID}. Configure a separate build directory with "
    "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DAQS_FUZZ=ON, or run ./scripts/fuzz, "
    "which does that in build-fuzz/.")
endif()

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
]] aqs_have_libfuzzer)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT aqs_have_libfuzzer)
  message(FATAL_ERROR
    "AQS_FUZZ=ON: ${CMAKE_CXX_COMPILER} cannot link -fsanitize=fuzzer,address,undefined. "
    "On Debian 12 libFuzzer and the sanitizer runtimes come with libclang-rt-14-dev "
    "(./scripts/setup-deps installs it).")
endif()

# fuzzer-no-link: coverage instrumentation without libFuzzer's main(), for
# the libraries; the fuzz targets add -fsanitize=fuzzer when they link.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                    -fno-sanitize-recover=undefined)
add_link_options(-fsanitize=address,undefined)
