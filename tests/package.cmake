# SPDX-License-Identifier: Apache-2.0
# Install, Debian packages and the libingest ABI, label "package" (release tree only: an
# ASan-built libingest.so cannot be loaded by the uninstrumented downstream programs).
add_test(NAME package.install_consume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/package/install_consume.sh ${PROJECT_BINARY_DIR}
                 ${PROJECT_SOURCE_DIR})
add_test(NAME package.deb
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/package/deb.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
add_test(NAME package.abi
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/package/abi_check.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(package.install_consume package.deb package.abi PROPERTIES LABELS package TIMEOUT 300)
# installs the .debs onto this machine (root), runs the unit's commands as the service user,
# removes and purges them (tests/package/deb_install.sh)
add_test(NAME package.deb_install
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/package/deb_install.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
# (resource lock dpkg: the package database, never two installs at once; the other tests
# use the build tree's programs by path, so they run beside it)
set_tests_properties(package.deb_install PROPERTIES LABELS package TIMEOUT 900 RESOURCE_LOCK dpkg
                     SKIP_RETURN_CODE 77)
