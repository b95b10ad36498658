# The wheel (scikit-build-core): a wheel is a zip and cannot hold the
# libdct.so -> libdct.so.0 -> libdct.so.0.4.0 links (each would be a full
# copy), so every shared library of the project goes in once, under its plain
# name and without a versioned SONAME; the package checks the version itself.
function(dct_wheel_unversion dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "SHARED_LIBRARY")
      set_property(TARGET ${t} PROPERTY VERSION)
      set_property(TARGET ${t} PROPERTY SOVERSION)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    dct_wheel_unversion(${sub})
  endforeach()
endfunction()
