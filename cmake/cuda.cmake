# Optional GPU backend. CUDA and NCCL are looked for under CUDA_HOME or /usr/local/cuda.
# Found -> PARLAB_HAVE_CUDA is ON and runtime/ builds its cuda/ and nccl/ parts; absent -> we say so
# and build everything else. Nothing else in the tree tests the macro: backends are chosen through
# interfaces (runtime/comm/communicator.h), not #ifdef forests.
set(PARLAB_HAVE_CUDA OFF)
if(NOT PARLAB_CUDA STREQUAL "OFF")
  set(_cuda_hint "$ENV{CUDA_HOME}")
  if(NOT _cuda_hint)
    set(_cuda_hint /usr/local/cuda)
  endif()
  if(EXISTS "${_cuda_hint}/bin/nvcc")
    set(CUDAToolkit_ROOT "${_cuda_hint}")
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${_cuda_hint}/bin/nvcc")
    endif()
  endif()
  find_package(CUDAToolkit QUIET)
  find_library(NCCL_LIBRARY NAMES nccl HINTS ${_cuda_hint}/lib64 ${CUDAToolkit_LIBRARY_DIR})
  find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_cuda_hint}/include ${CUDAToolkit_INCLUDE_DIRS})
  if(CUDAToolkit_FOUND AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
    set(PARLAB_HAVE_CUDA ON)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) by default; override with -DCMAKE_CUDA_ARCHITECTURES=...
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    message(STATUS "parlab: CUDA ${CUDAToolkit_VERSION} and NCCL (${NCCL_LIBRARY}) found: building the GPU backend")
  elseif(PARLAB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "parlab: PARLAB_CUDA=ON but CUDA/NCCL were not found (looked in ${_cuda_hint})")
  else()
    message(STATUS "parlab: CUDA/NCCL not found (looked in ${_cuda_hint}): building without the GPU backend")
  endif()
else()
  message(STATUS "parlab: GPU backend disabled (PARLAB_CUDA=OFF)")
endif()

# The GPU backend is a plugin (runtime/device/backend.h). A program that may load it exports its
# own symbols, which the plugin resolves against (model, comm, train live in the program).
function(parlab_exports_for_cuda_plugin target)
  if(PARLAB_HAVE_CUDA)
    set_target_properties(${target} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endfunction()

# A program that links the GPU backend in instead of loading it (the GPU tests, the GPU bench):
# runtime/device's loader finds the entry point in the program and never opens the plugin.
function(parlab_link_cuda_backend target)
  if(PARLAB_HAVE_CUDA)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:parlab_cuda_backend>)
    target_link_libraries(${target} PRIVATE parlab_model_cuda parlab_comm_nccl parlab_device)
  endif()
endfunction()
