# Sanitizers and libFuzzer coverage for every target of the build (`make test` builds the tree
# this way in build-asan with clang, see docs/reliability.md):
#   -DBITNET_SANITIZE=address,undefined   every object and executable, tests included
#   -DBITNET_BUILD_FUZZERS=ON             also the coverage hooks libFuzzer steers by (clang only);
#                                         implies address,undefined when BITNET_SANITIZE is empty
set(BITNET_SANITIZE "" CACHE STRING "Build everything with -fsanitize=<list>, e.g. address,undefined")
if(BITNET_BUILD_FUZZERS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  if(NOT BITNET_SANITIZE)
    set(BITNET_SANITIZE "address,undefined")
  endif()
  # Coverage instrumentation only; the fuzz targets alone link libFuzzer (-fsanitize=fuzzer),
  # the sanitizer runtime answers the hooks in the ordinary test executables.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(BITNET_SANITIZE)
  # Any report ends the process with an error, so ctest and libFuzzer see it as a failure.
  add_compile_options(-fsanitize=${BITNET_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${BITNET_SANITIZE})
endif()
