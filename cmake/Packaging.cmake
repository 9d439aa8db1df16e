# `cpack -G DEB` in the build directory makes neuron-parallel-compile_<version>_<arch>.deb
# from what cmake/Install.cmake and the rules below install, under /usr.
include(${CMAKE_CURRENT_LIST_DIR}/Install.cmake)

set(NPC_MAINTAINER "neuron-parallel-compile maintainers <maintainers@neuron-parallel-compile.invalid>")

# Debian's copyright file points at the licence in /usr/share/common-licenses
# (lintian refuses a copy of the Apache-2.0 text); a native package carries
# its changelog as changelog.gz. Both are installed by `cmake --install` too.
string(TIMESTAMP NPC_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC) # honours SOURCE_DATE_EPOCH
configure_file(${CMAKE_CURRENT_LIST_DIR}/copyright.in ${CMAKE_BINARY_DIR}/debian/copyright @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/changelog.in ${CMAKE_BINARY_DIR}/debian/changelog @ONLY)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/debian/changelog.gz
  COMMAND ${CMAKE_COMMAND} -DGZIP=${NPC_GZIP} -DINPUT=${CMAKE_BINARY_DIR}/debian/changelog
          -DOUTPUT=${CMAKE_BINARY_DIR}/debian/changelog.gz -P ${CMAKE_CURRENT_LIST_DIR}/GzipFile.cmake
  DEPENDS ${CMAKE_BINARY_DIR}/debian/changelog ${CMAKE_CURRENT_LIST_DIR}/GzipFile.cmake
  VERBATIM)
add_custom_target(npc_debian_docs ALL DEPENDS ${CMAKE_BINARY_DIR}/debian/changelog.gz)
install(FILES ${CMAKE_BINARY_DIR}/debian/copyright ${CMAKE_BINARY_DIR}/debian/changelog.gz
        DESTINATION ${NPC_DOC_DIR})

# lintian's view of the static-pie wrapper, with the reason in the file.
if(NPC_STATIC_WRAPPER)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/lintian-overrides
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME neuron-parallel-compile)
endif()

set(CPACK_PACKAGE_NAME neuron-parallel-compile)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "neuron-parallel-compile maintainers")
set(CPACK_PACKAGE_CONTACT ${NPC_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "parallel ahead-of-time compiler for AWS Neuron training graphs")
set(CPACK_PACKAGE_DESCRIPTION
    "A drop-in replacement for the AWS Neuron tool neuron_parallel_compile.
It runs a short trial of a training command in graph-extraction mode,
collects the graphs it dumps, compiles them in parallel with retries, and
leaves the results in the Neuron persistent compile cache, so the real run
finds every graph compiled. Also neuron_cache, to inspect, prune, verify,
export and import the cache, and neuron_cc_wrapper, the compile entry a
framework calls for each graph.")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${NPC_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcurl is loaded with dlopen() when an s3:// cache is used
# (src/curl_loader/dlopen.cpp), so dpkg-shlibdeps cannot see it: name it
# here (CPack merges this with what dpkg-shlibdeps finds). 7.88 is Debian
# 12's, the oldest the S3 client is tested with; the portable release
# (tools/release.sh) names 7.75, the first that signs S3 requests, which
# Ubuntu 22.04 (7.81) has.
set(NPC_DEB_CURL_VERSION "7.88" CACHE STRING "The oldest libcurl4 the .deb depends on")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libcurl4 (>= ${NPC_DEB_CURL_VERSION})")
# Maintainer files (none here) and the md5sums: 0644, as dpkg expects.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
