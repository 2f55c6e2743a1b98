/* Row-level access to the fp64 reference, for checks that sample rows of a
 * problem too large to run the whole reference on (the demo, benchmarks). */
#ifndef SW_CPU_REF_H
#define SW_CPU_REF_H

#include "attn_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output row (head_dim doubles) and natural-log LSE of query token t
 * (0-based within request req) for qo head h. scratch: >= kv_len doubles. */
void sw_ref_row(const sw_attn_problem *pb, int32_t req, int32_t t, int32_t h, double *out,
                double *lse, double *scratch);

#ifdef __cplusplus
}
#endif
#endif
