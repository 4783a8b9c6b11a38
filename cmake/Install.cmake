# `cmake --install`: headers under include/disc, the static libraries, the CMake package
# (find_package(disc CONFIG) -> disc::disc) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(disc INTERFACE)
target_link_libraries(disc INTERFACE disc_engine)
add_library(disc::disc ALIAS disc)

install(TARGETS disc disc_engine disc_memory disc_jit disc_devices disc_ir disc_base EXPORT discTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT discTargets NAMESPACE disc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
foreach(dir base ir devices jit memory engine)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/disc
          FILES_MATCHING PATTERN "*.h")
endforeach()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/discConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/discConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/discConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/discConfig.cmake ${PROJECT_BINARY_DIR}/discConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
configure_file(${PROJECT_SOURCE_DIR}/cmake/disc.pc.in ${PROJECT_BINARY_DIR}/disc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/disc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(TARGETS disc-train disc-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
