# CUDA detection and the architecture list. CUDA is optional: with DUET_CUDA=AUTO the backend is
# built when a toolkit is found (PATH, CUDACXX, or /usr/local/cuda), and a stub is linked
# otherwise. Sets DUET_HAVE_CUDA and DUET_CUDA_ARCHS (the list kernels are built for).
set(DUET_HAVE_CUDA OFF)
set(DUET_CUDA_REASON "")
if(DUET_CUDA STREQUAL "OFF")
  set(DUET_CUDA_REASON "not built: DUET_CUDA=OFF")
else()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(DUET_HAVE_CUDA ON)
  elseif(DUET_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DUET_CUDA=ON but no CUDA toolkit was found (set CUDACXX or install one at /usr/local/cuda)")
  else()
    set(DUET_CUDA_REASON "not built: no CUDA toolkit was found at configure time")
  endif()
endif()

if(DUET_HAVE_CUDA)
  # Default: one cubin per major version of the GPUs people own, each the oldest architecture of
  # its major, which the newer minors run natively: sm_75 (Turing), sm_80 (Ampere and Ada: sm_86,
  # 87, 88 and 89 run sm_80 cubins, and no tier uses an instruction those add), sm_90a (Hopper:
  # an H100/H200 runs its own cubin, with the architecture-specific instructions wgmma and
  # setmaxnreg for the tiers that use them), sm_120 (Blackwell GeForce and workstation cards),
  # as far as the toolkit offers them; PTX of sm_80 for the GPUs without a cubin (below). Listing
  # sm_86 or sm_89 as well costs a cubin of every tier each and gains nothing (docs/cuda-kernels.md, "Build").
  # (CUDA 13 dropped sm_70; with a CUDA 12 toolkit add it: -DDUET_CUDA_ARCHS="70;75;...".)
  if(NOT DUET_CUDA_ARCHS)
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE _arch_out ERROR_QUIET)
    string(REGEX MATCHALL "compute_[0-9]+" _computes "${_arch_out}")
    set(_default "")
    foreach(_c IN LISTS _computes)
      string(REPLACE "compute_" "" _n "${_c}")
      if(_n EQUAL 75 OR _n EQUAL 80 OR _n EQUAL 120)
        list(APPEND _default ${_n})
      elseif(_n EQUAL 90)
        list(APPEND _default 90a)
      endif()
    endforeach()
    list(REMOVE_DUPLICATES _default)
    list(SORT _default COMPARE NATURAL)
    set(DUET_CUDA_ARCHS "${_default}" CACHE STRING "CUDA architectures to build kernels for (e.g. 75;80;90a)" FORCE)
  endif()
  # PTX: of the oldest listed architecture that has every tier (sm_80: no kernel uses an
  # instruction newer than sm_80's, except the sm_90a-only tiers, whose PTX no other GPU can JIT),
  # so that every GPU from sm_80 on that lacks a cubin (sm_100 and sm_103 data-centre Blackwell,
  # sm_110, later ones) JIT-compiles the whole set; PTX of sm_120 would run on none of those.
  # Without an sm_80+ entry, the newest one's.
  if(NOT DUET_CUDA_PTX_ARCH)
    list(GET DUET_CUDA_ARCHS -1 _ptx)
    foreach(_a IN LISTS DUET_CUDA_ARCHS)
      if(_a MATCHES "^[0-9]+$" AND _a GREATER_EQUAL 80)
        set(_ptx ${_a})
        break()
      endif()
    endforeach()
    set(DUET_CUDA_PTX_ARCH ${_ptx} CACHE STRING "Architecture whose PTX is embedded for JIT on GPUs without a cubin" FORCE)
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "")
  foreach(_a IN LISTS DUET_CUDA_ARCHS)
    if(_a STREQUAL DUET_CUDA_PTX_ARCH)
      list(APPEND CMAKE_CUDA_ARCHITECTURES ${_a})  # cubin and PTX
    else()
      list(APPEND CMAKE_CUDA_ARCHITECTURES ${_a}-real)
    endif()
  endforeach()
  # CMake < 3.26 does not know nvcc's C++20 flag (nvcc >= 12 accepts it).
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
     AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "duet: CUDA ${CUDAToolkit_VERSION}, kernels for sm ${DUET_CUDA_ARCHS}, PTX for compute_${DUET_CUDA_PTX_ARCH}")
endif()
