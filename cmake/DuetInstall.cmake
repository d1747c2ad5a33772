# Installation: headers, libduet.so, the `duet` and `duet-llama` commands, a CMake package with one component per
# backend (find_package(duet COMPONENTS vulkan) fails when this build has no Vulkan backend) and
# a pkg-config file. Both package files are relocatable: `cmake --install build --prefix P` works
# for any P.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DUET_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/duet)

install(TARGETS duet_shared EXPORT duetTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS duet duet-llama RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/duet ${PROJECT_SOURCE_DIR}/api/include/duet
  ${PROJECT_SOURCE_DIR}/onnx/include/duet ${PROJECT_SOURCE_DIR}/llm/include/duet
  ${DUET_GENERATED_INCLUDE}/duet
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development FILES_MATCHING PATTERN "*.h")
install(EXPORT duetTargets NAMESPACE duet:: DESTINATION ${DUET_CMAKE_DIR} COMPONENT development)

# The backends this build contains: the package's components.
set(DUET_BUILT_BACKENDS cpu)
if(DUET_HAVE_VULKAN)
  list(APPEND DUET_BUILT_BACKENDS vulkan)
endif()
if(DUET_HAVE_CUDA)
  list(APPEND DUET_BUILT_BACKENDS cuda)
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/duetConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/duetConfig.cmake INSTALL_DESTINATION ${DUET_CMAKE_DIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/duetConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/duetConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/duetConfigVersion.cmake
  DESTINATION ${DUET_CMAKE_DIR} COMPONENT development)

# pkg-config: the prefix is found from the .pc file's own folder.
file(RELATIVE_PATH DUET_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" DUET_PC_TO_PREFIX "${DUET_PC_TO_PREFIX}")
string(REPLACE ";" " " DUET_PC_BACKENDS "${DUET_BUILT_BACKENDS}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/duet.pc.in ${CMAKE_BINARY_DIR}/cmake/duet.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/duet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT development)
