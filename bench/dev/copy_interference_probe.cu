/* copy_interference_probe.cu - does anything beside the swap engine's host-tier landing slow the
 * copy engine? 96 MiB (the h32-8/d128 host-tier step) in 8 MiB host-to-device copies from
 * huge-page memory registered with cudaHostRegister (the store's host tier), alone and beside:
 * a kernel streaming reads over 4 GiB of HBM (all SMs, and a quarter of them), one streaming
 * writes, a kernel reading mapped pinned host memory (32 CTAs, and all SMs), and four CPU threads
 * copying 64 MiB buffers in host memory. GPU time of the copies (events around them), median of 10
 * after 3 warm-ups.
 * Build here: nvcc -O2 -std=c++17 -arch=sm_90a bench/dev/copy_interference_probe.cu -o cip
 * Measured on the H200 (a174ca6's parent): alone 54.3 GB/s; beside HBM reads 53.4, writes 53.7,
 * a quarter of the SMs reading 54.3; beside the CPU threads 53.2; beside SM reads of mapped host
 * memory 24.3 (32 CTAs) and 14.4 (all SMs): PCIe is shared, ~53-55 GB/s in all (the landing's
 * copies and SM reads of the tier do not add up). So the tile kernels' HBM traffic and the
 * engine's threads do not explain the landing's 51-53 GB/s (docs/perf/swap.md). */
#include <cuda_runtime.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include "probe_util.cuh"
__global__ void rd(const uint4 *p, size_t n, int reps, unsigned *sink) {
  uint32_t acc = 0;
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
      uint4 v = __ldcs(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678) *sink = acc;
}
__global__ void wr(uint4 *p, size_t n, int reps) {
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
      __stcs(p + i, make_uint4(r, i, 0, 0));
}
int main() {
  const size_t total = 96u << 20, piece = 8u << 20, hb = 4ull << 30, mh = 256u << 20;
  uint8_t *dev; CK(cudaMalloc(&dev, total));
  uint4 *big; CK(cudaMalloc(&big, hb)); CK(cudaMemset(big, 1, hb));
  unsigned *sink; CK(cudaMalloc(&sink, 4));
  const size_t bigh = 1ull << 30;
  uint8_t *h = probe_huge_pinned(bigh, cudaHostRegisterMapped, 1, nullptr);
  uint8_t *hm; CK(cudaHostAlloc(&hm, mh, cudaHostAllocMapped)); memset(hm, 1, mh);
  uint4 *hmd; CK(cudaHostGetDevicePointer((void **)&hmd, hm, 0));
  cudaStream_t cs, ks; CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
  cudaEvent_t a, b, ka, kb; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); CK(cudaEventCreate(&ka)); CK(cudaEventCreate(&kb));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto copies = [&](size_t off) {
    CK(cudaEventRecord(a, cs));
    for (size_t o = 0; o < total; o += piece) CK(cudaMemcpyAsync(dev + o, h + off + o, piece, cudaMemcpyHostToDevice, cs));
    CK(cudaEventRecord(b, cs));
  };
  std::atomic<int> stop{0};
  const char *names[] = {"alone", "hbm-read kernel", "hbm-write kernel", "host-mapped read kernel(32 CTAs)", "host-mapped read kernel(all SMs)", "cpu memcpy x4", "hbm-read 1/4 SMs"};
  for (int mode = 0; mode < 7; mode++) {
    std::vector<float> t, kt;
    for (int r = 0; r < 13; r++) {
      std::vector<std::thread> th;
      stop = 0;
      if (mode == 5) for (int k = 0; k < 4; k++) th.emplace_back([&, k] { std::vector<char> s(64 << 20, 1), d(64 << 20); while (!stop) memcpy(d.data(), s.data(), s.size()); });
      CK(cudaEventRecord(ka, ks));
      if (mode == 1) rd<<<sms * 4, 512, 0, ks>>>(big, hb / 16, 3, sink);
      if (mode == 2) wr<<<sms * 4, 512, 0, ks>>>(big, hb / 16, 3);
      if (mode == 3) rd<<<32, 512, 0, ks>>>(hmd, mh / 16, 1, sink);
      if (mode == 4) rd<<<sms * 2, 512, 0, ks>>>(hmd, mh / 16, 1, sink);
      if (mode == 6) rd<<<sms, 512, 0, ks>>>(big, hb / 16, 1, sink);
      CK(cudaEventRecord(kb, ks));
      copies((size_t)(r % 4) * total);
      CK(cudaDeviceSynchronize());
      stop = 1; for (auto &x : th) x.join();
      float ms, kms; CK(cudaEventElapsedTime(&ms, a, b)); CK(cudaEventElapsedTime(&kms, ka, kb));
      if (r >= 3) { t.push_back(ms); kt.push_back(kms); }
    }
    std::sort(t.begin(), t.end()); std::sort(kt.begin(), kt.end());
    printf("%-34s copy %.3f ms %.1f GB/s (min %.1f max %.1f)   kernel %.3f ms\n", names[mode], t[t.size()/2], total / (t[t.size()/2] * 1e-3) / 1e9,
           total / (t.back() * 1e-3) / 1e9, total / (t[0] * 1e-3) / 1e9, kt[kt.size()/2]);
  }
  return 0;
}
