# ctest cuda_kernels_hip_check: every object of the HIP check (bitnet_hip_kernels_check) holds a
# device code object for each architecture asked for, with kernels in it, i.e. hipcc compiled
# the kernels' device code and did not just produce host stubs. Without the check configured
# (no -DBITNET_HIP=ON) it prints SKIPPED and ctest reports the test skipped.
#   cmake -DOBJECTS="a.o;b.o" -DARCHS="gfx90a;gfx1030" -P hip_objects_check.cmake
#   cmake -DSKIP_REASON="..." -P hip_objects_check.cmake
if(DEFINED SKIP_REASON)
  message("SKIPPED: ${SKIP_REASON}")
  return()
endif()
set(failures)
foreach(obj ${OBJECTS})
  if(NOT EXISTS ${obj})
    list(APPEND failures "${obj}: missing (build bitnet_hip_kernels_check)")
    continue()
  endif()
  get_filename_component(name ${obj} NAME)
  # The offload bundle's entry names ("hipv4-amdgcn-amd-amdhsa--gfx90a") and the kernel
  # descriptors (symbol "<kernel>.kd") of the embedded AMDGPU ELF files.
  file(STRINGS ${obj} bundles REGEX "amdgcn-amd-amdhsa--gfx[0-9a-f]+")
  file(STRINGS ${obj} kds REGEX "\\.kd$")
  set(found)
  foreach(arch ${ARCHS})
    if(bundles MATCHES "amdgcn-amd-amdhsa--${arch}(;|$|[^0-9a-z])")
      list(APPEND found ${arch})
    else()
      list(APPEND failures "${name}: no ${arch} code object")
    endif()
  endforeach()
  list(LENGTH kds n_kds)
  if(n_kds EQUAL 0)
    list(APPEND failures "${name}: no kernel descriptors")
  endif()
  message("${name}: code objects for [${found}], ${n_kds} kernel descriptor names")
endforeach()
if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "HIP objects:\n  ${text}")
endif()
