/* The environment check: a variable with Spillway's prefix that nothing
 * reads gets exactly one warning on stderr when the library loads; the
 * documented ones and other prefixes get none. The program re-executes
 * itself with a prepared environment and reads the child's stderr. */
#include "core/sw_core.h"
#include "sw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Runs this program as "child" with environment envp; its stderr into buf. */
static void child_stderr(const char *self, char *const envp[], char *buf, size_t cap)
{
    memset(buf, 0, cap);
    char path[] = "/tmp/sw_env_warning_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        execve("/proc/self/exe", (char *const[]){(char *)self, "child", NULL}, envp);
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const ssize_t n = pread(fd, buf, cap - 1, 0);
    close(fd);
    unlink(path);
    CHECK(n > 0);
    printf("child's stderr:\n%s", buf);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "child")) {
        printf("%d\n", sw_cpu_count() > 0); /* any call into the library */
        printf("%s\n", sw_prefill_cpu_isa()); /* the ISA choice, once */
        return 0;
    }
    /* the names the check knows, and lookalikes it must not */
    CHECK(sw_env_name_known("SPILLWAY_NUM_THREADS", 20));
    CHECK(sw_env_name_known("SPILLWAY_CPU_ISA", 16));
    CHECK(sw_env_name_known("SPILLWAY_OPPONENT", 17));
    CHECK(sw_env_name_known("SPILLWAY_LIB", 12));
    CHECK(sw_env_name_known("PATH", 4));
    CHECK(sw_env_name_known("SW_TEST_SEED", 12));
    CHECK(!sw_env_name_known("SPILLWAY_NUM_THREAD", 19));
    CHECK(!sw_env_name_known("SPILLWAY_NUM_THREADSX", 21));
    CHECK(!sw_env_name_known("SPILLWAY_", 9));
    CHECK(!sw_env_name_known("SPILLWAY_CUDA_KERNEL", 20)); /* a removed switch */
    CHECK(!sw_env_name_known("SPILLWAY_LIBX", 13));
    /* the length bounds the name: "SPILLWAY_LIB=..." judged on 12 bytes */
    CHECK(sw_env_name_known("SPILLWAY_LIB=/x", 12));

    char buf[4096];
    child_stderr(argv[0], (char *const[]){"SPILLWAY_NUM_THREAD=2", "SPILLWAY_NUM_THREADS=1",
                                          "SPILLWAY_OPPONENT=", "SPILLWAY_BOGUS=x",
                                          "SPILLWAYX=1", "OTHER_SPILLWAY_X=1",
                                          "SPILLWAY_CPU_ISA=scalar", NULL},
                 buf, sizeof buf);
    CHECK(count(buf, "warning") == 2);
    CHECK(count(buf, "SPILLWAY_NUM_THREAD ") == 1);
    CHECK(count(buf, "SPILLWAY_BOGUS ") == 1);
    CHECK(count(buf, "SPILLWAY_NUM_THREADS") == 0);
    CHECK(count(buf, "SPILLWAYX") == 0);
    CHECK(count(buf, "OTHER_SPILLWAY") == 0);
    /* known names with values the library cannot use: said, not ignored
     * silently */
    child_stderr(argv[0], (char *const[]){"SPILLWAY_NUM_THREADS=2x", "SPILLWAY_CPU_ISA=bogus",
                                          NULL},
                 buf, sizeof buf);
    CHECK(count(buf, "warning") == 2);
    CHECK(count(buf, "SPILLWAY_NUM_THREADS=2x is not a whole number") == 1);
    CHECK(count(buf, "SPILLWAY_CPU_ISA=bogus is not one of") == 1);
    return sw_test_failures ? 1 : 0;
}
