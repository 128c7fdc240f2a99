# SPDX-License-Identifier: Apache-2.0
# libFuzzer targets (tests/fuzz/fuzz_*.c), built only in the clang tree (-DING_FUZZ=ON,
# `make fuzz` / `make test` use build-fuzz/). ctest label "fuzz": each target runs a few
# seconds over its committed seed corpus (tests/fuzz/corpus/<target>/) plus what it finds,
# and fails on any crash, sanitizer report, leak or oracle abort.
if(ING_FUZZ)
  set(ING_FUZZ_TEST_SECONDS 4 CACHE STRING "seconds per fuzz target in the ctest regression run")
  file(GLOB _fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  add_custom_target(fuzz_all)
  foreach(_f IN LISTS _fuzzers)
    get_filename_component(_n ${_f} NAME_WE)
    add_executable(${_n} ${_f})
    target_link_libraries(${_n} PRIVATE ing_control ing_dataplane ing_numa ing_common ing_proto)
    target_link_options(${_n} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz_all ${_n})
    add_test(NAME fuzz.${_n}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh $<TARGET_FILE:${_n}>
                     ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${_n}
                     ${CMAKE_BINARY_DIR}/fuzz-work/${_n} ${ING_FUZZ_TEST_SECONDS})
    set_tests_properties(fuzz.${_n} PROPERTIES LABELS fuzz TIMEOUT 120)
  endforeach()
endif()
