# Installs the build into WORK_DIR/prefix and uses it as a stranger would:
#  1. the files are where the package says they are;
#  2. examples/ configures with find_package(duet COMPONENTS cpu), builds and runs (C and C++,
#     text generation from a GGUF file through the C API);
#  3. every built backend is a component that is found; one that is not built fails, by name;
#  4. pkg-config gives flags that compile and link the C example;
#  5. where the build has the Python module, the installed package imports and runs a graph.
cmake_minimum_required(VERSION 3.25)

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. Install.
run_checked("cmake --install" ${CMAKE_COMMAND} --install ${DUET_BUILD_DIR} --prefix ${prefix})
foreach(f ${LIBDIR}/libduet.so include/duet/duet.h include/duet/version.h include/duet/engine.h
    include/duet/builtin_engine.h ${LIBDIR}/cmake/duet/duetConfig.cmake
    ${LIBDIR}/cmake/duet/duetConfigVersion.cmake ${LIBDIR}/cmake/duet/duetTargets.cmake
    ${LIBDIR}/pkgconfig/duet.pc bin/duet bin/duet-llama include/duet/duet_llm.h include/duet/llm.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# 2. The examples, against the installed package.
# A sanitized libduet needs its runtime loaded first: sanitized builds build the examples so too.
run_checked("configuring examples/" ${CMAKE_COMMAND} -S ${DUET_SOURCE_DIR}/examples
  -B ${WORK_DIR}/examples -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_LINK_FLAGS}")
run_checked("building examples/" ${CMAKE_COMMAND} --build ${WORK_DIR}/examples)
run_checked("hello_c" ${WORK_DIR}/examples/hello_c)
if(NOT LAST_OUTPUT MATCHES "softmax of row 0: 0.0321 0.0871 0.2369 0.6439")
  message(FATAL_ERROR "hello_c printed:\n${LAST_OUTPUT}")
endif()
run_checked("hello_cpp" ${WORK_DIR}/examples/hello_cpp)
if(NOT LAST_OUTPUT MATCHES "y\\[0\\]\\[7\\] = 0\\.1728")
  message(FATAL_ERROR "hello_cpp printed:\n${LAST_OUTPUT}")
endif()
# Text generation through the C API, greedy on the llama.cpp-converted fixture (its random
# weights repeat one piece), and the installed duet-llama.
run_checked("generate" ${CMAKE_COMMAND} -E env DUET_POLICY=device=cpu ${WORK_DIR}/examples/generate
  ${DUET_SOURCE_DIR}/tests/llama/data/llamacpp_tiny.gguf "the quick brown fox" 4)
if(NOT LAST_OUTPUT MATCHES "^foxfoxfoxfox\n")
  message(FATAL_ERROR "generate printed:\n${LAST_OUTPUT}")
endif()
run_checked("duet-llama --help" ${prefix}/bin/duet-llama --help)
# Both APIs honour DUET_POLICY when the program gives no policy (open_engine(graph) and
# duet_engine_create(g, NULL, ...)): every op on the CPU, and a malformed one is an error naming it.
run_checked("hello_cpp under DUET_POLICY" ${CMAKE_COMMAND} -E env DUET_POLICY=device=cpu
  ${WORK_DIR}/examples/hello_cpp)
if(NOT LAST_OUTPUT MATCHES "xw: cpu:0" OR NOT LAST_OUTPUT MATCHES "y: cpu:0")
  message(FATAL_ERROR "hello_cpp under DUET_POLICY=device=cpu printed:\n${LAST_OUTPUT}")
endif()
foreach(example hello_c hello_cpp)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DUET_POLICY=device=nowhere
    ${WORK_DIR}/examples/${example} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "DUET_POLICY")
    message(FATAL_ERROR "${example} under DUET_POLICY=device=nowhere (${rc}):\n${out}\n${err}")
  endif()
endforeach()

# 3. Components: one per built backend.
file(WRITE ${WORK_DIR}/components/CMakeLists.txt
  "cmake_minimum_required(VERSION 3.20)\nproject(components LANGUAGES NONE)\n"
  "find_package(duet REQUIRED COMPONENTS \${WANT})\n"
  "message(STATUS \"duet backends: \${duet_BACKENDS}\")\n")
foreach(backend ${BACKENDS})
  run_checked("find_package(duet COMPONENTS ${backend})" ${CMAKE_COMMAND}
    -S ${WORK_DIR}/components -B ${WORK_DIR}/components/build-${backend}
    -DCMAKE_PREFIX_PATH=${prefix} -DWANT=${backend})
endforeach()
# A backend this build does not have (when every real one is built, a made-up one).
set(missing metal)
foreach(b vulkan cuda)
  if(NOT b IN_LIST BACKENDS)
    set(missing ${b})
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/components
  -B ${WORK_DIR}/components/build-missing -DCMAKE_PREFIX_PATH=${prefix} -DWANT=${missing}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "built without the '${missing}' backend")
  message(FATAL_ERROR "find_package(duet COMPONENTS ${missing}) should fail naming it:\n${out}\n${err}")
endif()

# 4. pkg-config.
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  run_checked("pkg-config" ${PKG_CONFIG} --cflags --libs duet)
  string(STRIP "${LAST_OUTPUT}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  separate_arguments(link_flags UNIX_COMMAND "${SANITIZE_LINK_FLAGS}")
  run_checked("cc with pkg-config flags" ${C_COMPILER} -std=c99 ${SANITIZE_FLAGS}
    ${DUET_SOURCE_DIR}/examples/hello.c
    ${flags} ${link_flags} -o ${WORK_DIR}/hello_pkgconfig)  # the rpath comes from duet.pc
  run_checked("hello_pkgconfig" ${WORK_DIR}/hello_pkgconfig)
else()
  message(STATUS "pkg-config not found: its check is skipped")
endif()
# 5. The Python module from the prefix alone (PYTHON is empty where it was not built). Lines,
# not semicolons: CMake would split the argument there.
if(PYTHON)
  run_checked("import duet from ${PYTHON_DIR}" ${CMAKE_COMMAND} -E env
    PYTHONPATH=${prefix}/${PYTHON_DIR} DUET_POLICY=device=cpu ${PYTHON} -c
    "import duet, numpy as np\nb = duet.GraphBuilder('t')\nb.output(b.relu(b.input('x', 'f32', [3]), name='y'))\nprint(duet.__file__, duet.Engine(b.build()).run({'x': np.array([-1, 2, -3], np.float32)})['y'])")
  if(NOT LAST_OUTPUT MATCHES "^${prefix}/${PYTHON_DIR}/duet/__init__.py[ \n]+\\[0\\. +2\\. +0\\.\\]")
    message(FATAL_ERROR "the installed duet module printed:\n${LAST_OUTPUT}")
  endif()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "installed package OK: ${BACKENDS}")

