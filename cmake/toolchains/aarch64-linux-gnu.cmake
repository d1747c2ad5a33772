# Cross-compiling for 64-bit ARM Linux with Debian's cross compiler (g++-aarch64-linux-gnu) and
# the arm64 libraries of a multiarch install (libspdlog-dev:arm64 ...; tools/setup.sh --arm64).
# Programs built here run under qemu-user (qemu-aarch64), which CMake uses as the emulator for
# the tests (gtest_discover_tests, ctest).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and packages of the target only; programs (cmake helpers) of the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# No -L prefix: the multiarch libc6:arm64 puts the loader where the programs name it
# (/lib/ld-linux-aarch64.so.1), and with -L /usr/aarch64-linux-gnu qemu 7.2 spins forever
# opening /proc/self/fd/N (Files.AStreamIsReadOnceWithinItsCap).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
