# Compresses INPUT to OUTPUT as Debian wants (-9; -n: no name or time stamp,
# so a rebuild gives the same bytes), through a temp file.
#   cmake -DGZIP=path -DINPUT=file -DOUTPUT=file.gz -P GzipFile.cmake
execute_process(
  COMMAND ${GZIP} -9n -c ${INPUT}
  OUTPUT_FILE ${OUTPUT}.tmp
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(REMOVE ${OUTPUT}.tmp)
  message(FATAL_ERROR "gzip ${INPUT} failed: ${status}")
endif()
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
