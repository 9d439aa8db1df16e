# What `cmake --install` puts under the prefix: the three programs, a man page
# and a bash completion script for each, the documentation (the licence and
# changelog, in Debian's form, come from cmake/Packaging.cmake).
#
# The man pages and completion scripts are made at build time from the built
# programs (--help and --version through help2man; the hidden
# --print-bash-completion), so they say what the programs accept.
include(GNUInstallDirs)

set(NPC_PROGRAMS neuron_parallel_compile neuron_cache neuron_cc_wrapper)
set(NPC_DOC_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/neuron-parallel-compile)
set(NPC_COMPLETION_DIR ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions)

# The NAME line of each man page (help2man's --name); cmake/man/<program>.h2m
# adds what --help cannot say (SYNOPSIS, SEE ALSO).
set(NPC_MAN_NAME_neuron_parallel_compile "compile the graphs of a training run in parallel into the Neuron compile cache")
set(NPC_MAN_NAME_neuron_cache "inspect and maintain the Neuron persistent compile cache")
set(NPC_MAN_NAME_neuron_cc_wrapper "serve a graph's NEFF from the Neuron compile cache, or compile and cache it")

# Debian wants 0755 directories whatever the umask of whoever builds.
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

find_program(NPC_HELP2MAN help2man)
find_program(NPC_GZIP gzip)
if(NOT NPC_HELP2MAN OR NOT NPC_GZIP)
  message(WARNING "help2man or gzip not found: no man pages will be built or installed "
                  "(tools/setup.sh installs them)")
endif()

set(npc_generated_docs)
foreach(program ${NPC_PROGRAMS})
  set(completion ${CMAKE_BINARY_DIR}/completion/${program})
  add_custom_command(
    OUTPUT ${completion}
    COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${program}> -DOUTPUT=${completion}
            -P ${CMAKE_CURRENT_LIST_DIR}/WriteCompletion.cmake
    DEPENDS ${program} ${CMAKE_CURRENT_LIST_DIR}/WriteCompletion.cmake
    COMMENT "Writing the bash completion of ${program}"
    VERBATIM)
  list(APPEND npc_generated_docs ${completion})
  install(FILES ${completion} DESTINATION ${NPC_COMPLETION_DIR})

  if(NPC_HELP2MAN AND NPC_GZIP)
    set(man ${CMAKE_BINARY_DIR}/man/${program}.1.gz)
    add_custom_command(
      OUTPUT ${man}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${NPC_HELP2MAN} -DGZIP=${NPC_GZIP}
              -DPROGRAM=$<TARGET_FILE:${program}> -DNAME=${NPC_MAN_NAME_${program}}
              -DINCLUDE=${CMAKE_CURRENT_LIST_DIR}/man/${program}.h2m -DOUTPUT=${man}
              -P ${CMAKE_CURRENT_LIST_DIR}/WriteManPage.cmake
      DEPENDS ${program} ${CMAKE_CURRENT_LIST_DIR}/WriteManPage.cmake ${CMAKE_CURRENT_LIST_DIR}/GzipFile.cmake
              ${CMAKE_CURRENT_LIST_DIR}/man/${program}.h2m
      COMMENT "Writing the man page of ${program}"
      VERBATIM)
    list(APPEND npc_generated_docs ${man})
    install(FILES ${man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endforeach()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/completion)
add_custom_target(npc_program_docs ALL DEPENDS ${npc_generated_docs})

install(TARGETS ${NPC_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The wrapper's dynamic build, which its static build hands S3 work to
# (src/CMakeLists.txt): a program of the package, not a command.
if(NPC_STATIC_WRAPPER)
  install(TARGETS neuron_cc_wrapper_s3 RUNTIME DESTINATION ${NPC_WRAPPER_S3_DIR})
endif()
# The masquerade directory: only neuronx-cc, a relative link to the wrapper
# (made with it at build time, src/CMakeLists.txt), copied as a link.
install(DIRECTORY ${CMAKE_BINARY_DIR}/${NPC_MASQUERADE_DIR} DESTINATION ${NPC_WRAPPER_S3_DIR})

file(GLOB npc_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${npc_docs} DESTINATION ${NPC_DOC_DIR})
# What the pages show (docs/trace.md's picture and the trace it is drawn from).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/images DESTINATION ${NPC_DOC_DIR})
