# SPDX-License-Identifier: Apache-2.0
# libFuzzer targets (tests/fuzz/fuzz_*.c), built only in the clang tree (-DING_FUZZ=ON,
# `make fuzz` / `make test` use build-fuzz/). ctest label "fuzz": each target runs a few
# seconds over its committed seed corpus (tests/fuzz/corpus/<target>/) plus what it finds,
# and fails on any crash, sanitizer report, leak or oracle abort.
if(ING_FUZZ)
  set(ING_FUZZ_TEST_SECONDS 4 CACHE STRING "seconds per fuzz target in the ctest regression run")
  # each links the library of the code it feeds
  set(_deps_fuzz_catalog ing_store)
  set(_deps_fuzz_chunk ing_service)           # control/service/xport/chunk.c
  set(_deps_fuzz_deframe ing_net_client)
  set(_deps_fuzz_grpc_server ing_net_server ing_service)   # the server, fed PushFrames bytes
  set(_deps_fuzz_parse ing_pool_spec)         # common/parse.c, dataplane/pool_spec.c
  set(_deps_fuzz_proto ing_service)           # the per-call protobuf-c arena
  set(_deps_fuzz_store_path ing_store)
  file(GLOB _fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  add_custom_target(fuzz_all)
  foreach(_f IN LISTS _fuzzers)
    get_filename_component(_n ${_f} NAME_WE)
    add_executable(${_n} ${_f})
    target_link_libraries(${_n} PRIVATE ${_deps_${_n}} ing_common ing_proto)
    target_link_options(${_n} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz_all ${_n})
    add_test(NAME fuzz.${_n}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh $<TARGET_FILE:${_n}>
                     ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${_n}
                     ${CMAKE_BINARY_DIR}/fuzz-work/${_n} ${ING_FUZZ_TEST_SECONDS})
    set_tests_properties(fuzz.${_n} PROPERTIES LABELS fuzz TIMEOUT 120)
  endforeach()
endif()
