# Install step of the wheel's `python` component (CMakeLists.txt, "wheel"): the CLI into
# fusionopt/bin with RUNPATH $ORIGIN/../lib, and the shared libraries the CLI and
# libfusionopt.so.1 load, resolved as this machine's loader would, copied into fusionopt/lib with
# RUNPATH $ORIGIN. FUSIONOPT_WHEEL_CLI and FUSIONOPT_WHEEL_LIBRARY are set by the install(CODE)
# before this script.
set(lib_dir "${CMAKE_INSTALL_PREFIX}/fusionopt/lib")
set(bin_dir "${CMAKE_INSTALL_PREFIX}/fusionopt/bin")
find_program(PATCHELF patchelf REQUIRED)
file(MAKE_DIRECTORY "${lib_dir}" "${bin_dir}")
file(COPY "${FUSIONOPT_WHEEL_CLI}" DESTINATION "${bin_dir}")
execute_process(COMMAND "${PATCHELF}" --set-rpath "$ORIGIN/../lib" "${bin_dir}/fusionopt" COMMAND_ERROR_IS_FATAL ANY)
if(CMAKE_INSTALL_DO_STRIP)  # install(TARGETS) strips its own; this copy is ours to strip
  find_program(STRIP strip REQUIRED)
  execute_process(COMMAND "${STRIP}" --strip-unneeded "${bin_dir}/fusionopt" COMMAND_ERROR_IS_FATAL ANY)
endif()

file(GET_RUNTIME_DEPENDENCIES
     EXECUTABLES "${FUSIONOPT_WHEEL_CLI}"
     LIBRARIES "${FUSIONOPT_WHEEL_LIBRARY}"
     RESOLVED_DEPENDENCIES_VAR resolved
     UNRESOLVED_DEPENDENCIES_VAR unresolved
     # The C and C++ runtimes every Debian 12 host has, and the loader itself.
     PRE_EXCLUDE_REGEXES "^ld-linux" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^librt\\.so" "^libpthread\\.so"
                         "^libstdc\\+\\+\\.so" "^libgcc_s\\.so" "^libfusionopt_cuda")
if(unresolved)
  message(FATAL_ERROR "the wheel cannot bundle what the loader cannot find: ${unresolved}")
endif()
foreach(library IN LISTS resolved)
  get_filename_component(name "${library}" NAME)
  message(STATUS "bundling ${name} (from ${library})")
  file(REAL_PATH "${library}" contents)  # the file under its soname, without the symlink chain
  file(COPY_FILE "${contents}" "${lib_dir}/${name}")
  execute_process(COMMAND "${PATCHELF}" --set-rpath "$ORIGIN" "${lib_dir}/${name}" COMMAND_ERROR_IS_FATAL ANY)
endforeach()
