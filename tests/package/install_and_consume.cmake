# Installs the build into a scratch prefix, then builds tests/package/consumer
# against it twice (find_package and pkg-config) and runs both under mpirun.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/cmake-build -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${MPIEXEC} --oversubscribe --allow-run-as-root -np 2 ${WORK_DIR}/cmake-build/consumer)

# pkg-config: dct for libdct, ompi-c because the consumer calls MPI itself.
file(GLOB pcdirs ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${pcdirs}")
execute_process(COMMAND pkg-config --cflags --libs dct ompi-c OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot find dct in ${pcdirs}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
file(GLOB libdirs ${prefix}/lib*/libdct.so ${prefix}/lib/*/libdct.so)
get_filename_component(libdir "${libdirs}" DIRECTORY)
run(cc ${SOURCE_DIR}/main.c -o ${WORK_DIR}/consumer-pc ${flags} -Wl,-rpath,${libdir})
run(${MPIEXEC} --oversubscribe --allow-run-as-root -np 2 ${WORK_DIR}/consumer-pc)
