# cmake -DOUT=<header> -DROOT=<source root> -DLIST=<file with one path per line> -P SourceHash.cmake
# Writes <header> defining AOTC_SOURCE_HASH: a SHA-256 over the relative path and content of
# every compiler source (tools/aotc/BuildId.cpp hashes it into every build id, so a rebuilt
# aotc whose code changed never gives an old header's id to a new object). Rewritten only
# when the hash changes, so an unchanged tree rebuilds nothing.
file(STRINGS ${LIST} _files)
list(SORT _files)
set(_all "")
foreach(f ${_files})
  file(SHA256 ${f} _h)
  file(RELATIVE_PATH _rel ${ROOT} ${f})
  string(APPEND _all "${_rel} ${_h}\n")
endforeach()
string(SHA256 _hash "${_all}")
set(_text "#define AOTC_SOURCE_HASH \"${_hash}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} _old)
  if(_old STREQUAL _text)
    return()
  endif()
endif()
file(WRITE ${OUT} "${_text}")
