# One static library per area, nj_<area>, whose link dependencies state the layering (docs/architecture.md). An
# area compiles against its own headers and those of the areas it depends on, and no others: each area's public
# headers are reached through an include root of its own (<build>/include-areas/<area>/nj/<area>, a link to
# include/nj/<area>), which its dependents inherit through the link. An include of a header from an area not
# below it is a "No such file" error, so an upward include fails to build. Its private headers (FOLDER's, included
# as "<area>/name.hpp") are reached through a root that holds its folder alone, so no other area can include them.
function(nj_area area)
  cmake_parse_arguments(ARG "" "FOLDER" "DEPENDS;PUBLIC_LINK;PRIVATE_LINK" ${ARGN})
  if(NOT ARG_FOLDER OR ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "nj_area(${area}): FOLDER is required; not understood: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  nj_area_sources(sources "${ARG_FOLDER}")
  add_library(nj_${area} STATIC ${sources})
  nj_include_root(public "include-areas/${area}" "nj/${area}" "${PROJECT_SOURCE_DIR}/include/nj/${area}")
  nj_include_root(private "private-areas/${area}" "${area}" "${ARG_FOLDER}")
  target_include_directories(nj_${area} PUBLIC "${public}" PRIVATE "${private}")
  list(TRANSFORM ARG_DEPENDS PREPEND nj_)
  target_link_libraries(nj_${area} PUBLIC ${ARG_DEPENDS} ${ARG_PUBLIC_LINK}
                        PRIVATE ${ARG_PRIVATE_LINK} nj_warnings nj_optimize)
endfunction()

# An include root, <build>/`root`, that holds `folder` alone, as `link` (a symbolic link to it): includes through the
# root name `link`'s path, and reach nothing else.
function(nj_include_root out root link folder)
  set(root "${PROJECT_BINARY_DIR}/${root}")
  get_filename_component(parent "${root}/${link}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${folder}" "${root}/${link}" SYMBOLIC)
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# The sources of area `area` under `folder`: its *.cpp, and those of its cuda/ folder (with *.cu) in a build with
# CUDA, of its without_cuda/ folder in one without.
function(nj_area_sources out folder)
  if(NJ_HAVE_CUDA)
    set(variant cuda)
  else()
    set(variant without_cuda)
  endif()
  file(GLOB sources CONFIGURE_DEPENDS "${folder}/*.cpp" "${folder}/${variant}/*.cpp" "${folder}/${variant}/*.cu")
  set(${out} ${sources} PARENT_SCOPE)
endfunction()
