# Writes PROGRAM's bash completion script (its hidden --print-bash-completion)
# to OUTPUT, through a temp file so that a failed run leaves no half script.
#   cmake -DPROGRAM=path -DOUTPUT=file -P WriteCompletion.cmake
execute_process(
  COMMAND ${PROGRAM} --print-bash-completion
  OUTPUT_FILE ${OUTPUT}.tmp
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(REMOVE ${OUTPUT}.tmp)
  message(FATAL_ERROR "${PROGRAM} --print-bash-completion failed: ${status}")
endif()
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
