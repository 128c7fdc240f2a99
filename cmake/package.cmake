# SPDX-License-Identifier: Apache-2.0
# What an application developer consumes, and the Debian packages:
#  - ingest.pc (pkg-config ingest) and a CMake package (find_package(ingest) ->
#    ingest::ingest), both relocatable: they describe libingest.so.1 + include/ingest/.
#    No Requires.private/Libs.private: only the shared library ships, its dependencies
#    (protobuf-c, nghttp2, OpenSSL, verbs, rdma_cm) are linked into it as DT_NEEDED.
#  - CPack DEB (make deb): h3000-ingest (programs, libingest.so.1, systemd units, config,
#    ingest-hugepages, man pages, docs; maintainer scripts deploy/debian/) and h3000-ingest-dev
#    (header, libingest.so, ingest.pc, CMake package, the protos in share/h3000-ingest/proto).
include(CMakePackageConfigHelpers)
set(ING_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ingest)

# pkg-config: prefix derived from the .pc's own place, so any --prefix / DESTDIR works
file(RELATIVE_PATH _pc_up ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
set(ING_PC_PREFIX "\${pcfiledir}/${_pc_up}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/ingest.pc.in ${CMAKE_BINARY_DIR}/ingest.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ingest.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ingestConfig.cmake.in
  ${CMAKE_BINARY_DIR}/ingestConfig.cmake INSTALL_DESTINATION ${ING_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ingestConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ingestConfig.cmake ${CMAKE_BINARY_DIR}/ingestConfigVersion.cmake
        DESTINATION ${ING_CMAKE_DIR} COMPONENT dev)
install(EXPORT ingestTargets NAMESPACE ingest:: DESTINATION ${ING_CMAKE_DIR} COMPONENT dev)

# ---- Debian packages
set(CPACK_PACKAGE_NAME h3000-ingest)
set(CPACK_PACKAGE_VENDOR "h3000 ingest")
set(CPACK_PACKAGE_CONTACT "h3000 ingest maintainers <ingest@h3000.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "large image frames from producers to durable storage")
# Installed with DESTDIR=<staging> and prefix /usr, whatever the tree was configured with,
# so install-time paths (the systemd unit's ExecStart) are the packaged ones.
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)    # runtime Depends from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://h3000.invalid/ingest")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME h3000-ingest)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "h3000 ingest node and producer tools
 ingestd receives large image frames over RDMA READ or gRPC and stores
 them durably (fdatasync, SQLite catalog); ingest-send, ingest-verify,
 ingest-topo, ingest-doctor and ingest-bench send, check, plan and measure.
 With the producer library libingest.so.1, a systemd unit that runs ingestd
 as the sandboxed system user h3000, ingest-hugepages and the docs.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "ibverbs-providers, rdma-core")
# adduser: the postinst creates the service user h3000
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
# maintainer scripts (deploy/debian): user and data dir, the units' state
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/conffiles
    ${CMAKE_BINARY_DIR}/deb/triggers ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME h3000-ingest-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "h3000-ingest (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION "h3000 ingest producer library: development files
 The headers include/ingest/*.h, the libingest.so link, ingest.pc for
 pkg-config and the CMake package (find_package(ingest): ingest::ingest);
 the gRPC protocol (/usr/share/h3000-ingest/proto/h3000.proto, health.proto)
 for clients generated in any language (Grpc.Net.Client, grpcio, grpc-js).")
file(WRITE ${CMAKE_BINARY_DIR}/deb/conffiles "/etc/h3000/ingestd.conf\n")
file(WRITE ${CMAKE_BINARY_DIR}/deb/triggers "activate-noawait ldconfig\n")
include(CPack)
