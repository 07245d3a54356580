// Device kernels of the lab network (the non-GEMM half; linear.cpp drives cuBLAS). The math
// mirrors runtime/compute/cpu/*.cpp line by line; this file is compiled with -fmad=false so the
// element-wise kernels round like the CPU code, which is compiled with -ffp-contract=off.
#include <cmath>
#include <cstdint>

#include "runtime/compute/cuda/kernels.h"
#include "runtime/compute/gelu_math.h"

namespace parlab::compute::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops: enough blocks to fill any current GPU, never more than the data needs.
constexpr int64_t kMaxBlocks = 65536;

int blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ __forceinline__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- GELU: the per-element math of gelu_math.h, shared with the CPU kernels -------------
__global__ void gelu_forward_kernel(float* out, const float* inp, int64_t N) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) out[i] = compute::gelu_value(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, int64_t N) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) dinp[i] = compute::gelu_derivative(inp[i]) * dout[i];
}

// ---- residual, bias broadcast ---------------------------------------------------------------
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t N) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* acc, const float* d, int64_t N) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) acc[i] += d[i];
}

__global__ void bias_residual_kernel(float* y, const float* bias, const float* x, int64_t N, int64_t h) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) y[i] += bias[i % h] + x[i];
}

__global__ void broadcast_rows_kernel(float* out, const float* bias, int64_t B, int64_t OC) {
  const int64_t N = B * OC;
  for (int64_t i = first_index(); i < N; i += grid_stride()) out[i] = bias[i % OC];
}

// ---- bias gradient: fixed-order column sums --------------------------------------------------
// Block (32, kRowLanes): thread (tx, ty) owns column blockIdx.x * 32 + tx and sums rows
// ty, ty + kRowLanes, ... in increasing order; then thread (tx, 0) adds the kRowLanes partial
// sums in increasing ty. Same assignment and order on every run: no atomics, same bits. A warp
// reads 32 consecutive floats of one row (coalesced).
constexpr int kColumnsPerBlock = 32;
constexpr int kRowLanes = 16;

__global__ void column_sums_kernel(float* dbias, const float* dout, int64_t B, int64_t OC) {
  __shared__ float partial[kRowLanes][kColumnsPerBlock];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + tx;
  float sum = 0.0f;
  if (o < OC) {
    for (int64_t b = ty; b < B; b += kRowLanes) sum += dout[b * OC + o];
  }
  partial[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && o < OC) {
    float total = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) total += partial[k][tx];
    dbias[o] += total;
  }
}

// ---- softmax cross-entropy: one block per row -------------------------------------------------
constexpr int kRowThreads = 128;  // power of two: the tree below halves it

__global__ void softmax_ce_forward_kernel(float* losses, float* probs, const float* logits, const int32_t* labels,
                                          int64_t C) {
  __shared__ float smax[kRowThreads];
  __shared__ double ssum[kRowThreads];
  const int tid = threadIdx.x;
  const int64_t b = blockIdx.x;
  const float* row = logits + b * C;
  float* prow = probs + b * C;
  // Row max (exact in any order), so exp never overflows.
  float m = -INFINITY;
  for (int64_t c = tid; c < C; c += kRowThreads) m = fmaxf(m, row[c]);
  smax[tid] = m;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
    __syncthreads();
  }
  const float maxval = smax[0];
  // Sum of exponentials in double (as the CPU), over a fixed tree.
  double sum = 0.0;
  for (int64_t c = tid; c < C; c += kRowThreads) {
    const float e = expf(row[c] - maxval);
    prow[c] = e;
    sum += e;
  }
  ssum[tid] = sum;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (tid < s) ssum[tid] += ssum[tid + s];
    __syncthreads();
  }
  const double total = ssum[0];
  const float inv_sum = static_cast<float>(1.0 / total);
  for (int64_t c = tid; c < C; c += kRowThreads) prow[c] *= inv_sum;
  if (tid == 0) {
    const int32_t label = labels[b];
    losses[b] = (label < 0 || label >= C) ? NAN : static_cast<float>(log(total) - (row[label] - maxval));
  }
}

__global__ void softmax_ce_backward_kernel(float* dlogits, const float* probs, const int32_t* labels, float loss_scale,
                                           int64_t B, int64_t C) {
  const int64_t N = B * C;
  for (int64_t i = first_index(); i < N; i += grid_stride()) {
    const int64_t c = i % C;
    const float indicator = (c == labels[i / C]) ? 1.0f : 0.0f;
    dlogits[i] = (probs[i] - indicator) * loss_scale;
  }
}

// ---- fault injection ---------------------------------------------------------------------------
__device__ __forceinline__ unsigned long long device_nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stall_kernel(volatile int* flag, unsigned long long max_ns) {
  const unsigned long long start = device_nanoseconds();
  while (*flag == 0 && device_nanoseconds() - start < max_ns) __nanosleep(100000);
}

}  // namespace

void gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t N) {
  if (N == 0) return;
  gelu_forward_kernel<<<blocks_for(N), kThreads, 0, stream>>>(out, inp, N);
  PARLAB_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, int64_t N) {
  if (N == 0) return;
  gelu_backward_kernel<<<blocks_for(N), kThreads, 0, stream>>>(dinp, inp, dout, N);
  PARLAB_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

void residual_forward(cudaStream_t stream, float* out, const float* inp1, const float* inp2, int64_t N) {
  if (N == 0) return;
  add_kernel<<<blocks_for(N), kThreads, 0, stream>>>(out, inp1, inp2, N);
  PARLAB_CUDA_CHECK_LAUNCH("add_kernel");
}

void residual_backward(cudaStream_t stream, float* dinp1, float* dinp2, const float* dout, int64_t N) {
  if (N == 0) return;
  for (float* d : {dinp1, dinp2}) {
    if (d == nullptr) continue;
    accumulate_kernel<<<blocks_for(N), kThreads, 0, stream>>>(d, dout, N);
    PARLAB_CUDA_CHECK_LAUNCH("accumulate_kernel");
  }
}

void bias_residual_accumulate(cudaStream_t stream, float* y, const float* bias, const float* x, int64_t N, int64_t h) {
  if (N == 0) return;
  bias_residual_kernel<<<blocks_for(N), kThreads, 0, stream>>>(y, bias, x, N, h);
  PARLAB_CUDA_CHECK_LAUNCH("bias_residual_kernel");
}

void broadcast_rows(cudaStream_t stream, float* out, const float* bias, int64_t B, int64_t OC) {
  if (B == 0 || OC == 0) return;
  broadcast_rows_kernel<<<blocks_for(B * OC), kThreads, 0, stream>>>(out, bias, B, OC);
  PARLAB_CUDA_CHECK_LAUNCH("broadcast_rows_kernel");
}

void column_sums_accumulate(cudaStream_t stream, float* dbias, const float* dout, int64_t B, int64_t OC) {
  if (B == 0 || OC == 0) return;
  const dim3 block(kColumnsPerBlock, kRowLanes);
  const auto grid = static_cast<unsigned>((OC + kColumnsPerBlock - 1) / kColumnsPerBlock);
  column_sums_kernel<<<grid, block, 0, stream>>>(dbias, dout, B, OC);
  PARLAB_CUDA_CHECK_LAUNCH("column_sums_kernel");
}

void softmax_cross_entropy_forward(cudaStream_t stream, float* losses, float* probs, const float* logits,
                                   const int32_t* labels, int64_t B, int64_t C) {
  if (B == 0) return;
  // One block per row: B is a microbatch (<= 2^31 - 1 blocks is never the limit here).
  softmax_ce_forward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(losses, probs, logits, labels, C);
  PARLAB_CUDA_CHECK_LAUNCH("softmax_ce_forward_kernel");
}

void softmax_cross_entropy_backward(cudaStream_t stream, float* dlogits, const float* probs, const int32_t* labels,
                                    float loss_scale, int64_t B, int64_t C) {
  if (B == 0) return;
  softmax_ce_backward_kernel<<<blocks_for(B * C), kThreads, 0, stream>>>(dlogits, probs, labels, loss_scale, B, C);
  PARLAB_CUDA_CHECK_LAUNCH("softmax_ce_backward_kernel");
}

StreamStall::StreamStall(cudaStream_t stream, double max_seconds) {
  const auto max_ns = static_cast<unsigned long long>(max_seconds * 1e9);
  stall_kernel<<<1, 1, 0, stream>>>(flag_.device_pointer(), max_ns);
  PARLAB_CUDA_CHECK_LAUNCH("stall_kernel");
  done_.record(stream);
}

StreamStall::~StreamStall() {
  release();
  // The kernel reads the flag until it sees the release: free the flag only after it exited.
  cudaEventSynchronize(done_.get());
}

void StreamStall::release() { flag_.set(1); }

}  // namespace parlab::compute::cuda
