/* The commands of the spillway command-line program (spillway.c). */
#ifndef SW_TOOL_COMMON_H
#define SW_TOOL_COMMON_H

#include "spillway.h"

int cmd_demo(int argc, char **argv);  /* demo.c: parts 1 and 2 */
int cmd_store(int argc, char **argv); /* store_cmds.c: inspect, verify, repair */

#endif
