# `cmake --install`: headers under include/disc (included as <disc/engine/trainer.h>), the
# example configs under share/disc/configs, the static libraries, the CMake package
# (find_package(disc CONFIG) -> disc::disc) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(disc INTERFACE)
target_link_libraries(disc INTERFACE disc_formats disc_engine)
# <disc/engine/trainer.h> for consumers; the headers include each other as "engine/...", which the
# libraries' include/disc covers.
target_include_directories(disc INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(disc INTERFACE cxx_std_20)
add_library(disc::disc ALIAS disc)

install(TARGETS disc disc_formats disc_engine disc_memory disc_jit disc_devices disc_ir disc_base EXPORT discTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT discTargets NAMESPACE disc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
foreach(dir base ir devices jit memory engine formats)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/disc
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/base/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/disc/base)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs DESTINATION ${CMAKE_INSTALL_DATADIR}/disc)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/discConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/discConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/discConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/discConfig.cmake ${PROJECT_BINARY_DIR}/discConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/disc)
configure_file(${PROJECT_SOURCE_DIR}/cmake/disc.pc.in ${PROJECT_BINARY_DIR}/disc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/disc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(TARGETS disc-train disc-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
