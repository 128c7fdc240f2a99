# SPDX-License-Identifier: Apache-2.0
# dpdk::static - DPDK EAL + ring + mempool linked statically, so ingestd carries no
# runtime dependency on the DPDK shared objects and no driver plugin directory is scanned.
# The mempool drivers register themselves from a constructor: they need --whole-archive.
# dataplane/pool.c uses "lf_stack" ("stack" where the CPU lacks a 128-bit CAS; free slots last
# freed, first taken: the recv copy writes a
# slot still in the cache); "ring" stays linked as DPDK's default ops.
# Found through pkg-config only (libdir and include dirs of libdpdk.pc: any architecture).
# Link it PRIVATE: its include dirs and -include rte_config.h must not reach other targets.
pkg_check_modules(DPDK REQUIRED libdpdk)
pkg_get_variable(DPDK_LIBDIR libdpdk libdir)
set(_dpdk_libs mempool_ring mempool_stack mempool ring stack eal kvargs telemetry)
foreach(_l IN LISTS _dpdk_libs)
  find_library(DPDK_${_l}_A NAMES librte_${_l}.a PATHS ${DPDK_LIBDIR} ${DPDK_STATIC_LIBRARY_DIRS}
               NO_DEFAULT_PATH REQUIRED)
endforeach()
add_library(dpdk::static INTERFACE IMPORTED)
# the include dirs only: libdpdk.pc's -march=corei7 and -include rte_config.h are set explicitly
set(_dpdk_inc)
foreach(_d IN LISTS DPDK_INCLUDE_DIRS)
  if(_d MATCHES "dpdk")
    list(APPEND _dpdk_inc ${_d})
  endif()
endforeach()
# dpdk::headers: include dirs and flags only, for a library whose archives come through
# another target that links dpdk::static (linking the archives twice would duplicate the
# --whole-archive mempool driver).
add_library(dpdk::headers INTERFACE IMPORTED)
target_include_directories(dpdk::headers SYSTEM INTERFACE ${_dpdk_inc})
target_compile_options(dpdk::headers INTERFACE -include rte_config.h
                       $<$<STREQUAL:${CMAKE_SYSTEM_PROCESSOR},x86_64>:-msse4.2>)
target_link_libraries(dpdk::static INTERFACE dpdk::headers)
target_link_libraries(dpdk::static INTERFACE
  -Wl,--whole-archive ${DPDK_mempool_ring_A} ${DPDK_mempool_stack_A} -Wl,--no-whole-archive
  ${DPDK_mempool_A} ${DPDK_ring_A} ${DPDK_stack_A} ${DPDK_eal_A} ${DPDK_kvargs_A} ${DPDK_telemetry_A}
  numa bsd Threads::Threads dl m)
