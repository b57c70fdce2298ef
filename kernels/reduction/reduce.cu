// Parallel sum reduction: the seven classic versions from Mark Harris, "Optimizing Parallel
// Reduction in CUDA" (selected by `variant`), plus modern options (vector loads, warp shuffles),
// finishing the whole grid in ONE launch.
//
// Signature and buffers:
//   in        n elements of T (from cudaMalloc, so aligned for the vector loads of variant 7)
//   out       1 element of ACC: receives the sum
//   partials  >= gridDim.x elements of ACC (ceil(n / 32) is always enough); used when finish == 0
//   counter   1 unsigned int, 0 before the first launch; the kernel leaves it at 0 again
//   n         number of elements, >= 1
// Launch: 1-D block of block_size_x threads,
//         1-D grid of ceil(n / (block_size_x * items_per_thread * vector)) blocks.
//
// Types (both default to float):
//   T    element type (float or int)
//   ACC  accumulator type (float, or long long for int input); every add is done in ACC.
// NOTE: the CUDA 13 builtin headers (NVRTC's and nvcc's) use `T` as a template parameter name,
// so T cannot be a compiler option (-DT=float breaks them). Put `#define T ...` (and ACC) in the
// source text in front of this file, as Kernel Tuner does for tunable parameters.
//
// Tunable parameters (Kernel Tuner prepends `#define name value`):
//   block_size_x      threads per block: 32, 64, 128, 256, 512 or 1024
//   variant           1 interleaved addressing, divergent branch (tid % (2*s) == 0)
//                     2 interleaved addressing, strided index (2*s*tid): bank conflicts
//                     3 sequential addressing (s = blockDim/2 .. 1)
//                     4 = 3 + first add during the global load (items_per_thread = 2)
//                     5 = 4 + last warp unrolled (volatile shared memory + __syncwarp)
//                     6 = 5 + tree completely unrolled on the compile-time block size
//                     7 = 6 + many elements per thread in a grid-stride loop, vector loads,
//                         optional shuffle-based last warp
//   items_per_thread  elements (vectors, for variant 7) each thread adds in the load phase
//   vector            1, 2 or 4: width in elements of the global loads of variant 7
//   shuffle           0/1: variant 7 does the last warp with __shfl_down_sync, not shared memory
//   finish            0: the last block to finish sums the per-block partials and writes out[0]
//                     1: every block atomically adds its sum to out[0] (caller zeroes out[0])
// Variants 1-6 load a contiguous tile of block_size_x * items_per_thread * vector elements per
// block with scalar loads (so they are right for any of these values, given the grid above);
// variant 7 is right for any grid size.

#ifndef T
#define T float
#endif
#ifndef ACC
#define ACC float
#endif

#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef variant
#define variant 7
#endif
#ifndef items_per_thread
#if variant <= 3
#define items_per_thread 1
#elif variant <= 6
#define items_per_thread 2
#else
#define items_per_thread 4
#endif
#endif
#ifndef vector
#if variant == 7
#define vector 4
#else
#define vector 1
#endif
#endif
#ifndef shuffle
#if variant == 7
#define shuffle 1
#else
#define shuffle 0
#endif
#endif
#ifndef finish
#define finish 0
#endif

#if variant < 1 || variant > 7
#error "variant must be 1..7"
#endif
#if block_size_x < 32 || block_size_x > 1024 || (block_size_x & (block_size_x - 1)) != 0
#error "block_size_x must be a power of two in [32, 1024]"
#endif
#if items_per_thread < 1
#error "items_per_thread must be >= 1"
#endif
#if vector != 1 && vector != 2 && vector != 4
#error "vector must be 1, 2 or 4"
#endif

typedef T elem_t;
typedef ACC acc_t;  // a typedef, so that ACC = `long long` works in casts like acc_t(0)

// Type of one global load of V elements of E (variant 7).
template <typename E, int V> struct vec_of;
template <typename E> struct vec_of<E, 1> { typedef E type; };
template <> struct vec_of<float, 2> { typedef float2 type; };
template <> struct vec_of<float, 4> { typedef float4 type; };
template <> struct vec_of<int, 2> { typedef int2 type; };
template <> struct vec_of<int, 4> { typedef int4 type; };

// Sum of the elements of one load, each widened to acc_t before adding.
template <typename E> __device__ __forceinline__ acc_t lanes_sum(E a) { return (acc_t)a; }
__device__ __forceinline__ acc_t lanes_sum(float2 a) { return (acc_t)a.x + (acc_t)a.y; }
__device__ __forceinline__ acc_t lanes_sum(int2 a) { return (acc_t)a.x + (acc_t)a.y; }
__device__ __forceinline__ acc_t lanes_sum(float4 a)
{
    return (acc_t)a.x + (acc_t)a.y + (acc_t)a.z + (acc_t)a.w;
}
__device__ __forceinline__ acc_t lanes_sum(int4 a)
{
    return (acc_t)a.x + (acc_t)a.y + (acc_t)a.z + (acc_t)a.w;
}

__device__ __forceinline__ void atomic_add_acc(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_acc(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_acc(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_acc(long long* p, long long v)
{
    // No signed 64-bit atomicAdd; two's-complement addition gives the same bits.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// Last stage in warp 0 through shared memory (variants 5-7, shuffle == 0): s[0..63] -> s[0].
// Only lanes < w add, and they write below w while reading at or above w, so no element is both
// read and written in the same step. Since Volta the lanes of a warp need not run in lockstep,
// so __syncwarp() orders each step's writes before the next step's reads (the classic code
// relied on lockstep and is wrong there); volatile keeps the compiler from holding s[] in
// registers across steps. Each step is guarded by the block size: with 32 threads s[] has only
// 32 entries.
__device__ __forceinline__ void warp_reduce_smem(volatile acc_t* s, unsigned lane)
{
#pragma unroll
    for (unsigned w = 32; w > 0; w >>= 1) {
        if (block_size_x >= 2 * w && lane < w) s[lane] = s[lane] + s[lane + w];
        __syncwarp();
    }
}

// Last stage in warp 0 with register shuffles (variant 7, shuffle == 1): s[0..63] -> lane 0.
__device__ __forceinline__ acc_t warp_reduce_shfl(const acc_t* s, unsigned lane)
{
    acc_t x = s[lane];
    if (block_size_x >= 64) x += s[lane + 32];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_down_sync(0xffffffffu, x, offset);
    return x;
}

// Sum of v over the block, valid in thread 0 only (the others get 0). All threads must call it.
__device__ __forceinline__ acc_t block_reduce(acc_t v, acc_t* sdata, unsigned tid)
{
    sdata[tid] = v;
    __syncthreads();
#if variant == 1
    // Interleaved addressing: the active threads are spread over all warps (divergence), and
    // the modulo is slow.
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    return tid == 0 ? sdata[0] : acc_t(0);
#elif variant == 2
    // Active threads are contiguous, but the strided index causes shared-memory bank conflicts.
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        const unsigned idx = 2 * s * tid;
        if (idx < blockDim.x) sdata[idx] += sdata[idx + s];
        __syncthreads();
    }
    return tid == 0 ? sdata[0] : acc_t(0);
#elif variant <= 4
    // Sequential addressing: the lower half adds the upper half; conflict-free.
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    return tid == 0 ? sdata[0] : acc_t(0);
#elif variant == 5
    // As 3 down to 64 partial sums, then one warp finishes without __syncthreads.
    for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) warp_reduce_smem(sdata, tid);
    return tid == 0 ? sdata[0] : acc_t(0);
#else
    // Variants 6, 7: the tree is unrolled at compile time; dead steps vanish.
    if (block_size_x >= 1024) { if (tid < 512) sdata[tid] += sdata[tid + 512]; __syncthreads(); }
    if (block_size_x >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
    if (block_size_x >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
    if (block_size_x >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
#if variant == 7 && shuffle
    acc_t r = 0;
    if (tid < 32) r = warp_reduce_shfl(sdata, tid);
    return tid == 0 ? r : acc_t(0);
#else
    if (tid < 32) warp_reduce_smem(sdata, tid);
    return tid == 0 ? sdata[0] : acc_t(0);
#endif
#endif
}

extern "C" __global__ void __launch_bounds__(block_size_x)
reduce(const T* __restrict__ in, ACC* __restrict__ out, ACC* __restrict__ partials,
       unsigned int* __restrict__ counter, int n)
{
    __shared__ acc_t sdata[block_size_x];
    const unsigned tid = threadIdx.x;
    const size_t N = n > 0 ? (size_t)n : 0;
    acc_t v = 0;

#if variant < 7
    // One contiguous tile per block, element k*block_size_x + tid of it per thread (coalesced).
    // Variants 1-3: one element; 4-6: two, added while loading ("first add during load").
    {
        size_t i = (size_t)blockIdx.x * (block_size_x * items_per_thread * vector) + tid;
#pragma unroll
        for (int k = 0; k < items_per_thread * vector; ++k, i += block_size_x)
            if (i < N) v += (acc_t)in[i];
    }
#else
    {
        // Grid-stride loop over whole vectors; the stride is gridDim.x * block_size_x vectors
        // (gridDim.x * block_size_x * vector elements), so any grid covers everything.
        typedef typename vec_of<elem_t, vector>::type vec_t;
        const vec_t* __restrict__ vin = reinterpret_cast<const vec_t*>(in);
        const size_t nvec = N / vector;
        const size_t stride = (size_t)gridDim.x * block_size_x;
        size_t i = (size_t)blockIdx.x * block_size_x + tid;
        // Batches of items_per_thread loads with no bounds checks between them, so they can all
        // be in flight at once (with the launch grid, a thread's whole share is one batch).
        for (; i + (items_per_thread - 1) * stride < nvec; i += items_per_thread * stride) {
#pragma unroll
            for (int k = 0; k < items_per_thread; ++k) v += lanes_sum(vin[i + k * stride]);
        }
        for (; i < nvec; i += stride) v += lanes_sum(vin[i]);
        // Scalar tail: the last N % vector (< 4) elements, one each for the first threads.
        if (vector > 1) {
            const size_t t = nvec * vector + (size_t)blockIdx.x * block_size_x + tid;
            if (t < N) v += (acc_t)in[t];
        }
    }
#endif

    const acc_t block_sum = block_reduce(v, sdata, tid);

#if finish == 1
    if (tid == 0) atomic_add_acc(out, block_sum);
#else
    // Single-pass finish: the block that takes the last ticket sums all partials.
    __shared__ bool is_last;
    if (tid == 0) {
        partials[blockIdx.x] = block_sum;
        __threadfence();  // release: the partial is visible device-wide before the ticket
        const unsigned ticket = atomicAdd(counter, 1u);
        is_last = (ticket == gridDim.x - 1);
        if (is_last) __threadfence();  // acquire side, before reading the others' partials
    }
    __syncthreads();
    if (is_last) {  // uniform over the block, so the __syncthreads inside are safe
        acc_t s = 0;
        // __ldcg reads through L2, never a stale L1 line.
        for (size_t i = tid; i < gridDim.x; i += block_size_x) s += __ldcg(partials + i);
        const acc_t total = block_reduce(s, sdata, tid);
        if (tid == 0) {
            out[0] = total;  // overwrite: repeated launches give the same value
            // All other blocks have taken their ticket, so nothing races with this reset;
            // it leaves the counter ready for the next launch (Kernel Tuner resets nothing).
            *counter = 0;
        }
    }
#endif
}
