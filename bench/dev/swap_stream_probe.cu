/* bench/dev/swap_stream_probe.cu - where the swap engine's bulk-copy tile
 * kernel (kernel 3, src/cuda/swap/swap_tile_bulk.cu; its variants in
 * swap_tile_v3_bulk_variants.cu) stops on the
 * all-resident bench tile: ~2.1 TB/s back to back on the H200 (50% of the
 * D2D copy), with 13 x 16 KiB in flight per SM (docs/perf/swap.md). One
 * program, one run: kernel 3's variants (bk_var bits,
 * defined next to the kernel, instantiated here only) timed iso and back to
 * back on the tile of `spillway bench swap --cases resident`, next to a
 * plain read of the same 64 MiB and the 1 GiB D2D copy.
 *
 *   variant          what it isolates
 *   0 perm / seq     the kernel as shipped; pool slots shuffled (as
 *                    swap_tile_check) or in block order (as the engine
 *                    fills a fresh pool: free slots by index)
 *   NOMATH           consumers release stages unread: memory + producer
 *   L2SRC            every group re-copies the CTA's first group (L2):
 *                    producer + consumers without HBM
 *   NOMATH|L2SRC     producer alone
 *   CONTIG           no block table, each CTA streams a contiguous region
 *   CONTIG|NOMATH    the TMA ring's own HBM ceiling
 *   CTA2             2 CTAs per SM (4 consumer warps, half the ring each)
 *   PROD2            2 producer warps (even / odd groups)
 *   DWIN             descriptors in shared memory (one bulk copy at start)
 *   NODIV            (with DWIN) no integer divisions in the producer loop
 *   FIX              DWIN|NODIV: once the library's opt-in (a race:
 *                    README.md here); DWIN|PROD2|NODIV failed
 *                    with a launch error on the H200 (not listed)
 *   0, again         drift check (the first row repeated last)
 *   read 64 MiB      int4 loads, 4 CTAs x 256 threads per SM, contiguous
 * Reading: NOMATH ~ 0 => memory/producer side; L2SRC >> 0 => HBM side;
 * CONTIG >> 0 => the block table (descriptor loads) or the slots' layout;
 * DWIN ~ CONTIG => the descriptor loads; seq >> perm => DRAM locality;
 * PROD2 / NODIV / CTA2 >> 0 => the one producer warp's issue rate.
 *
 * Each non-diagnostic variant is checked against an fp64 reference of the
 * tile (rel L2 <= 1e-2); those that keep the consumers' group order (all
 * but CTA2) must also be bit-identical to row 0.
 *
 * Build (here; sm_90a):
 *   nvcc -std=c++17 -O3 -Iinclude -Isrc -gencode=arch=compute_90a,code=sm_90a \
 *     -o /tmp/swap_stream_probe bench/dev/swap_stream_probe.cu \
 *     bench/dev/swap_tile_v0_mma.cu bench/dev/swap_tile_v1_cuda_cores.cu \
 *     src/cuda/swap/swap_tile.cu src/cuda/swap/swap_tile_stream.cu \
 *     src/cuda/swap/swap_tile_direct.cu src/cuda/swap/swap_gather.cu
 * (swap_tile_v3_bulk_variants.cu and swap_tile_check.cu -- its problem,
 * fp64 reference, upload and timing -- are included below, not linked.)
 * Run: swap_stream_probe [--reps N]; exit 0 pass, 1 fail, 77 no GPU. */
#include "swap_tile_v3_bulk_variants.cu"

#define SW_TILE_CHECK_NO_MAIN
#include "swap_tile_check.cu"

/* -------------------------------------------------------- the variants -- */
typedef sw_status (*launch_fn)(const sw_cuda_swap_tile_args *, cudaStream_t, int, int *);
struct variant {
    const char *name;
    launch_fn fn;
    int per;   /* CTAs per SM */
    bool seq;  /* pool slots in block order */
    int check; /* 0 diagnostic (output not checked), 1 vs fp64, 2 also = row 0 bitwise */
};
#define VAR(v) launch_bulk_v<256, (v)>
static const variant k_vars[] = {
    {"0 (shipped), slots shuffled", VAR(0), 1, false, 1},
    {"0 (shipped), slots in order", VAR(0), 1, true, 2},
    {"NOMATH", VAR(SW_BK_V_NOMATH), 1, false, 0},
    {"L2SRC", VAR(SW_BK_V_L2SRC), 1, false, 0},
    {"NOMATH|L2SRC", VAR(SW_BK_V_NOMATH | SW_BK_V_L2SRC), 1, false, 0},
    {"CONTIG", VAR(SW_BK_V_CONTIG), 1, false, 0},
    {"CONTIG|NOMATH", VAR(SW_BK_V_CONTIG | SW_BK_V_NOMATH), 1, false, 0},
    {"CTA2", VAR(SW_BK_V_CTA2), 2, false, 1},
    {"PROD2", VAR(SW_BK_V_PROD2), 1, false, 2},
    {"DWIN", VAR(SW_BK_V_DWIN), 1, false, 2},
    {"DWIN|NODIV", VAR(SW_BK_V_DWIN | SW_BK_V_NODIV), 1, false, 2},
    {"DWIN|PROD2", VAR(SW_BK_V_DWIN | SW_BK_V_PROD2), 1, false, 2},
    {"FIX (= DWIN|NODIV), slots in order", VAR(SW_BK_V_FIX), 1, true, 2},
    {"DWIN|CTA2", VAR(SW_BK_V_DWIN | SW_BK_V_CTA2), 2, false, 1},
    {"0 (shipped), again", VAR(0), 1, false, 2},
};

/* A plain read of n int4 (what one launch over the same bytes reaches). */
__global__ void read_kernel(const int4 *p, size_t n, int *sink)
{
    int acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff)
        *sink = acc;
}

static void print_row(const char *name, const char *shape, double kv, double d2d, double iso,
                      double b2b, const char *tail)
{
    printf("%-28s %-22s iso %.4f ms = %6.1f GB/s (%4.1f%%); b2b %.4f ms = %6.1f GB/s (%4.1f%%)%s\n",
           name, shape, iso, kv / (iso * 1e-3) / 1e9, 100.0 * kv / (iso * 1e-3) / 1e9 / d2d, b2b,
           kv / (b2b * 1e-3) / 1e9, 100.0 * kv / (b2b * 1e-3) / 1e9 / d2d, tail);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int reps = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("no CUDA device: SKIPPED\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("device 0: %s, sm_%d%d, %d SMs, %zu KiB shared memory per block (opt-in), %zu per SM\n",
           prop.name, prop.major, prop.minor, sms, prop.sharedMemPerBlockOptin / 1024,
           prop.sharedMemPerMultiprocessor / 1024);
    if (prop.major < 9) {
        printf("kernel 3 needs sm_90: SKIPPED\n");
        return 77;
    }
    /* the bench tile, as swap_tile_check --bench builds it */
    problem p;
    g_rng = 12345;
    make_problem(p, 2, 8, 256, 16, 2049 + 1, 6, 1, 1, 0, 2050, 32);
    /* the same blocks with block b in slot b (the engine's fresh pool) */
    problem ps = p;
    for (int b = 0; b < p.nblk; b++) {
        memcpy(&ps.pool[(size_t)b * p.slot_bytes], &p.pool[(size_t)p.slot[b] * p.slot_bytes],
               p.slot_bytes);
        ps.slot[b] = b;
    }
    const double kv = 2.0 * p.H * (double)p.len * p.D * 2;
    const double d2d = d2d_gbps();
    printf("tile: h16-2 d256 B16 bf16, %lld tokens in %d blocks, q_len 1, %.1f MiB of K/V; "
           "D2D cudaMemcpy of 1 GiB %.1f GB/s (2 x bytes / time)\n",
           (long long)p.len, p.nblk, kv / 1048576.0, d2d);
    std::vector<double> ref;
    reference(p, 1.0 / sqrt((double)p.D), ref);
    double rn = 0;
    for (double x : ref)
        rn += x * x;
    dev_problem d, ds;
    dev_upload(p, d, sms, 32);
    dev_upload(ps, ds, sms, 32);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    const int64_t hr = (int64_t)p.H * p.G;

    int fails = 0;
    std::vector<float> out0;
    for (const variant &V : k_vars) {
        dev_problem &dv = V.seq ? ds : d;
        sw_cuda_swap_tile_args a = tile_args(V.seq ? ps : p, dv, 0, p.nblk, 3, sms * V.per);
        int launched = 0;
        /* one attend (state, tile, merge, finalize) for the check */
        SK(sw_cuda_swap_state_init(dv.m, dv.l, dv.acc, hr, p.D, st));
        SK(V.fn(&a, st, V.per, &launched));
        if (!launched) {
            printf("%-28s no instance on this device\n", V.name);
            continue;
        }
        SK(sw_cuda_swap_merge(&a, st));
        SK(sw_cuda_swap_finalize(dv.m, dv.l, dv.acc, hr, p.D, NULL, NULL, dv.of32, st));
        CK(cudaStreamSynchronize(st));
        std::vector<float> o(ref.size());
        CK(cudaMemcpy(o.data(), dv.of32, o.size() * 4, cudaMemcpyDeviceToHost));
        char tail[96] = "; diagnostic (output not checked)";
        if (V.check) {
            double en = 0;
            bool fin = true;
            for (size_t i = 0; i < o.size(); i++) {
                fin = fin && isfinite(o[i]);
                en += (o[i] - ref[i]) * (o[i] - ref[i]);
            }
            const double rel = sqrt(en / rn);
            if (out0.empty())
                out0 = o;
            const bool same = V.check != 2 || !memcmp(o.data(), out0.data(), o.size() * 4);
            const bool ok = fin && rel <= 1e-2 && same;
            fails += !ok;
            snprintf(tail, sizeof tail, "; rel_l2 %.2e%s %s", rel,
                     V.check == 2 ? (same ? ", = row 0 bitwise" : ", != row 0 bitwise") : "",
                     ok ? "ok" : "FAIL");
        }
        for (int i = 0; i < 3; i++)
            SK(V.fn(&a, st, V.per, &launched));
        double iso, b2b;
        time_launch([&] { SK(V.fn(&a, st, V.per, &launched)); }, [] {}, st, reps, &iso, &b2b);
        char shape[48];
        snprintf(shape, sizeof shape, "grid %d x %d, %d/SM:", a.nchunks, a.H, V.per);
        print_row(V.name, shape, kv, d2d, iso, b2b, tail);
    }

    /* the same 64 MiB, contiguous, read by a plain kernel */
    int *sink;
    CK(cudaMalloc(&sink, 4));
    const size_t n = (size_t)kv / 16;
    const int4 *src = reinterpret_cast<const int4 *>(ds.pool);
    for (int per : {1, 4}) {
        const int grid = sms * per, nt = 1024 / per;
        read_kernel<<<grid, nt, 0, st>>>(src, n, sink);
        CK(cudaStreamSynchronize(st));
        double iso, b2b;
        time_launch([&] { read_kernel<<<grid, nt, 0, st>>>(src, n, sink); }, [] {}, st, reps,
                    &iso, &b2b);
        char shape[48];
        snprintf(shape, sizeof shape, "grid %d x %d threads:", grid, nt);
        print_row("read 64 MiB (plain loads)", shape, kv, d2d, iso, b2b, "");
    }
    cudaFree(sink);
    CK(cudaStreamDestroy(st));
    dev_free(d);
    dev_free(ds);
    printf("probe: %d check failure(s)\n", fails);
    return fails ? 1 : 0;
}
