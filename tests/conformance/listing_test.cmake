# With a Vulkan loader that crashes (DUET_VULKAN_LOADER), listing the conformance tests still
# succeeds and lists the tests that need no device, and the listing test fails with the reason.
function(run_with_crashing_loader)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DUET_VULKAN_LOADER=${LOADER} ${EXE} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 110)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

run_with_crashing_loader(--gtest_list_tests)
if(NOT rc EQUAL 0 OR NOT out MATCHES "ConformanceListing\\." OR NOT out MATCHES "CaseSet\\.")
  message(FATAL_ERROR "the listing did not survive a crashing Vulkan loader (${rc}):\n${out}\n${err}")
endif()
if(out MATCHES "AllDevices/")
  message(FATAL_ERROR "conformance tests listed although no device could be opened:\n${out}")
endif()

run_with_crashing_loader(--gtest_filter=ConformanceListing.*)
if(rc EQUAL 0)
  message(FATAL_ERROR "the listing test passed with a crashing Vulkan loader:\n${out}\n${err}")
endif()
message(STATUS "listing survived; the listing test failed as it should:\n${out}")
