# Writes PROGRAM's man page, made by help2man from its --help and --version,
# gzip-compressed (cmake/GzipFile.cmake), to OUTPUT.
# INCLUDE is a help2man include file: the sections --help cannot give.
#   cmake -DHELP2MAN=path -DGZIP=path -DPROGRAM=path -DNAME=text -DINCLUDE=file.h2m
#         -DOUTPUT=file.1.gz -P WriteManPage.cmake
execute_process(
  COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=1 --name=${NAME} --include=${INCLUDE}
          --output=${OUTPUT}.1 ${PROGRAM}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(REMOVE ${OUTPUT}.1)
  message(FATAL_ERROR "help2man ${PROGRAM} failed: ${status}")
endif()
set(INPUT ${OUTPUT}.1)
include(${CMAKE_CURRENT_LIST_DIR}/GzipFile.cmake)
file(REMOVE ${OUTPUT}.1)
