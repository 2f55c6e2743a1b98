# Writes OUT, a header that defines SW_BENCH_COMMIT: the commit of the source
# tree SRC (short hash; "+changes" when tracked files differ from it; "unknown"
# outside a git checkout), for the head of a bench's results file. Run at every
# build (cmake -P); the file is rewritten only when the text changes, so only
# bench/common.c recompiles, and only after a commit or an edit.
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit RESULT_VARIABLE rc ERROR_QUIET
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD --
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND commit "+changes")
  endif()
endif()
set(text "/* Written by cmake/bench_commit.cmake at build time. */\n#define SW_BENCH_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
