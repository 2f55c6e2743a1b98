/* Status names, dtype sizes, backend names, the thread-local error detail. */
#include "sw_test.h"

#include <pthread.h>
#include <string.h>

static void *other_thread(void *arg)
{
    (void)arg;
    /* A failure on another thread must not overwrite this thread's detail. */
    sw_prefill_plan *pl = NULL;
    (void)sw_prefill_plan_create(NULL, 1, NULL, NULL, &pl);
    return NULL;
}

int main(void)
{
    CHECK(strcmp(sw_status_str(SW_OK), "SW_OK") == 0);
    CHECK(strcmp(sw_status_str(SW_STATUS_INVALID), "SW_STATUS_INVALID") == 0);
    CHECK(strcmp(sw_status_str(SW_STATUS_WORKSPACE_TOO_SMALL), "SW_STATUS_WORKSPACE_TOO_SMALL") == 0);
    CHECK(strcmp(sw_status_str((sw_status)-999), "SW_STATUS_UNKNOWN") == 0);
    for (int s = 0; s >= SW_STATUS_INTERNAL; s--)
        CHECK(strcmp(sw_status_str((sw_status)s), "SW_STATUS_UNKNOWN") != 0);
    CHECK(sw_dtype_size(SW_DTYPE_BF16) == 2);
    CHECK(sw_dtype_size(SW_DTYPE_F16) == 2);
    CHECK(sw_dtype_size(SW_DTYPE_F32) == 4);
    CHECK(sw_dtype_size((sw_dtype)9) == 0);
    CHECK(strcmp(sw_backend_name(SW_BACKEND_CPU), "cpu") == 0);
    CHECK(sw_version_string() != NULL && strlen(sw_version_string()) > 0);

    sw_prefill_params p;
    sw_prefill_params_init(&p);
    p.head_dim = 100;
    int32_t ip[2] = {0, 4};
    sw_prefill_plan *pl = NULL;
    CHECK_STATUS(sw_prefill_plan_create(&p, 1, ip, ip, &pl), SW_STATUS_UNSUPPORTED);
    CHECK(strstr(sw_last_error(), "head_dim=100") != NULL);
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(strstr(sw_last_error(), "head_dim=100") != NULL);

    if (sw_test_failures) {
        fprintf(stderr, "test_status: %d failure(s)\n", sw_test_failures);
        return 1;
    }
    printf("test_status: ok\n");
    return 0;
}
