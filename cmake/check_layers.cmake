cmake_minimum_required(VERSION 3.25)
# The include layers of STYLE.md, checked on every build (the `check_layers` target): a file may include
# project headers only from its own layer and the layers below it, so an include that points up fails the
# build with the file, the header and what the layer may use. Tests, fuzz targets and benchmarks may
# include anything.   Usage: cmake -DROOT=<repository> -P cmake/check_layers.cmake
set(base "common topology jobs")
set(core "${base} scheduler/model scheduler/placement scheduler/queue scheduler/core")
# folder = the folders (or single headers) its files may include; the longest matching folder applies.
set(rules
  "common=common"
  "topology=common topology"
  "jobs=${base}"
  "scheduler/model=${base} scheduler/model"
  "scheduler/placement=${base} scheduler/model scheduler/placement"
  "scheduler/queue=${base} scheduler/model scheduler/placement scheduler/queue"
  "scheduler/core=${core}"
  "scheduler/lifecycle=${core} scheduler/lifecycle"
  "scheduler/sim=${core} scheduler/lifecycle scheduler/sim"
  "scheduler/store=${base} scheduler/model scheduler/lifecycle scheduler/store"
  "scheduler/daemon=${core} scheduler/lifecycle scheduler/store scheduler/daemon"
  "scheduler/api=${core} scheduler/lifecycle scheduler/store scheduler/daemon scheduler/api"
  "scheduler/ha=common scheduler/api scheduler/ha"
  "scheduler=${core} common scheduler"
  "agent=${base} agent"
  # The worker programs: their MLLOG writer is jobs/mllog.hpp; nothing of the scheduler or the agent.
  "workloads=common jobs workloads"
  "cli=${core} scheduler/lifecycle scheduler/sim cli")
set(roots common topology jobs workloads scheduler agent cli)

set(globs)
foreach(r IN LISTS roots)
  list(APPEND globs "${ROOT}/${r}/*.cpp" "${ROOT}/${r}/*.hpp")
endforeach()
file(GLOB_RECURSE files RELATIVE "${ROOT}" ${globs})
set(errors "")
foreach(f IN LISTS files)
  if(f MATCHES "(^|/)tests/|_test\\.cpp$|/build/")
    continue()
  endif()
  set(layer "")
  set(allowed "")
  foreach(rule IN LISTS rules)
    string(REGEX REPLACE "=.*" "" folder "${rule}")
    string(LENGTH "${folder}" len)
    string(LENGTH "${layer}" best)
    if((f MATCHES "^${folder}/") AND (len GREATER best))
      set(layer "${folder}")
      string(REGEX REPLACE "^[^=]*=" "" allowed "${rule}")
    endif()
  endforeach()
  if(layer STREQUAL "")
    continue()
  endif()
  separate_arguments(allowed)
  file(STRINGS "${ROOT}/${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"]+\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" header "${line}")
    string(REGEX MATCH "^[^/]+" top "${header}")
    if(NOT header MATCHES "/" OR NOT top IN_LIST roots)
      continue()  # a header beside the file, or not the project's
    endif()
    set(ok FALSE)
    foreach(a IN LISTS allowed)
      if(header STREQUAL a OR header MATCHES "^${a}/")
        set(ok TRUE)
        break()
      endif()
    endforeach()
    if(NOT ok)
      string(REPLACE ";" " " may "${allowed}")
      string(APPEND errors "  ${f} includes ${header}: above its layer (${layer} may include ${may})\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "layer check failed:\n${errors}")
endif()
