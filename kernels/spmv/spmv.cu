// CSR sparse matrix-vector product y = A x in ONE launch: the two kernels of seed 001 (one thread per
// row; the same with a shared-memory copy of the slice of x that the block's rows share) and what the
// literature does beyond them (several threads per row with shuffle reductions, several rows per
// thread group, read-only and streaming cache hints, unrolling, and a nonzero-split load-balanced
// variant for skewed row lengths), selected by `variant`.
//
// Signature and buffers:
//   row_ptr    rows + 1 int32 offsets (row_ptr[0] = 0, row_ptr[rows] = nnz)
//   col        nnz int32 column indices (< cols)
//   val        nnz values of T
//   x          cols values of T
//   y          rows values of T: written (never accumulated into), so repeated launches give the same y
//   carry_val  >= gridDim.x values of T        } variants 3, 4: each block's partial sum of the row it
//   carry_row  >= gridDim.x int32              } does not own (one per block of the largest grid)
//   counter    1 unsigned int, 0 before the first launch; variants 3, 4 leave it at 0 again
//   rows, cols matrix shape
// Launch: 1-D block of block_size_x threads; 1-D grid of
//         ceil(rows / (block_size_x / threads_per_row * row_iters)) blocks (variants 0-3), or
//         max(1, ceil(nnz / (block_size_x * row_iters))) blocks (variant 4).
//
// T: value type (float or double), put in front of the source as `#define T ...` (not -DT: CUDA 13's
// builtin headers use T as a template parameter name). Sums are accumulated in T, as cuSPARSE does.
//
// Tunable parameters (Kernel Tuner prepends `#define name value`):
//   variant          0 scalar: one thread per row (the seed's csrmul_kernel)
//                    1 scalar, x[j] read from a shared-memory copy of x[first row .. last row] of the
//                      block when j falls in it (the seed's csrmul_shared)
//                    2 vector: threads_per_row (2..32) consecutive lanes per row, shuffle reduction
//                    3 nonzero split: block b takes nonzeros [b*C, (b+1)*C), C = ceil(nnz / gridDim.x),
//                      found with a warp-wide 32-ary search of row_ptr; rows that start in its range are
//                      its own (threads_per_row lanes each), the leading piece of a row begun earlier is
//                      summed by the whole block into carry_*; the last block to finish adds the carries.
//                      Rows of any length, even one dense row, are spread over many blocks.
//                    4 nonzero split through shared memory (CSR-stream): block b takes the C = block_size_x *
//                      row_iters nonzeros [b*C, (b+1)*C) (grid: ceil(nnz / C) blocks), every thread loads
//                      row_iters products into shared memory (all loads in flight, coalesced), then groups of
//                      threads_per_row lanes sum the block's rows from there; carries as in variant 3.
//   block_size_x     threads per block
//   threads_per_row  lanes per row (power of two, <= 32); 1 for variants 0 and 1
//   row_iters        rows each thread group handles (variants 0-2); for variant 3 it only sets C;
//                    for variant 4 the nonzeros each thread loads
//   unroll           loads in flight per lane in the inner loop (1, 2, 4)
//   ldg              1: x through the read-only data cache (__ldg)
//   stream           1: val and col loaded with evict-first hints (__ldcs): they are read once, so x
//                    keeps more of the cache

#ifndef T
#define T float
#endif
#ifndef variant
#define variant 2
#endif
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef threads_per_row
#define threads_per_row 4
#endif
#ifndef row_iters
#define row_iters 1
#endif
#ifndef unroll
#define unroll 1
#endif
#ifndef ldg
#define ldg 0
#endif
#ifndef stream
#define stream 0
#endif

#if variant < 0 || variant > 4
#error "variant must be 0..4"
#endif
#if (variant == 0 || variant == 1) && threads_per_row != 1
#error "the scalar variants use one thread per row"
#endif
#if threads_per_row < 1 || threads_per_row > 32 || (threads_per_row & (threads_per_row - 1)) != 0
#error "threads_per_row must be a power of two <= 32"
#endif
#if block_size_x % 32 != 0 || block_size_x > 1024
#error "block_size_x must be a multiple of 32, at most 1024"
#endif

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ T load_x(const T* __restrict__ x, int j) {
#if ldg
    return __ldg(x + j);
#else
    return x[j];
#endif
}

__device__ __forceinline__ T load_val(const T* __restrict__ val, int k) {
#if stream
    return __ldcs(val + k);
#else
    return val[k];
#endif
}

__device__ __forceinline__ int load_col(const int* __restrict__ col, int k) {
#if stream
    return __ldcs(col + k);
#else
    return col[k];
#endif
}

// sum of val[k] * x[col[k]] for k = begin, begin + step, ... < end, `unroll` products in flight
__device__ __forceinline__ T strided_dot(const int* __restrict__ col, const T* __restrict__ val,
                                         const T* __restrict__ x, int begin, int end, int step) {
    T sum = 0;
    int k = begin;
#if unroll > 1
    for (; k + (unroll - 1) * step < end; k += unroll * step) {
        int c[unroll];
        T v[unroll];
#pragma unroll
        for (int u = 0; u < unroll; u++) {
            c[u] = load_col(col, k + u * step);
            v[u] = load_val(val, k + u * step);
        }
#pragma unroll
        for (int u = 0; u < unroll; u++) sum += v[u] * load_x(x, c[u]);
    }
#endif
    for (; k < end; k += step) sum += load_val(val, k) * load_x(x, load_col(col, k));
    return sum;
}

// sum over the `width` lanes of a group (lane 0 of the group gets it); every lane of the warp calls it
__device__ __forceinline__ T group_sum(T sum, int width) {
    for (int offset = width / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(FULL_MASK, sum, offset, width);
    return sum;
}

#if variant >= 3
// first r in [0, rows] with row_ptr[r] >= target (row_ptr[rows] = nnz >= target): each step probes 32
// positions at once, so about log32(rows) dependent loads instead of log2(rows). All 32 lanes call it.
__device__ int warp_lower_bound(const int* __restrict__ row_ptr, int rows, int target, int lane) {
    int lo = 0, hi = rows;
    while (lo < hi) {
        int stride = (hi - lo + 31) / 32;
        int probe = lo + lane * stride;
        bool ge = probe >= hi || row_ptr[probe] >= target;
        unsigned mask = __ballot_sync(FULL_MASK, ge);
        if (mask == 0) {
            lo = lo + 31 * stride + 1;
        } else {
            int first = __ffs(mask) - 1;
            int new_hi = min(lo + first * stride, hi);
            lo = first == 0 ? lo : lo + (first - 1) * stride + 1;
            hi = new_hi;
        }
    }
    return lo;
}

__device__ T block_sum(T sum, T* shared) {  // the whole block's sum, returned to thread 0
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    sum = group_sum(sum, 32);
    if (lane == 0) shared[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < block_size_x / 32 ? shared[lane] : T(0);
        sum = group_sum(sum, 32);
    }
    return sum;
}
#endif

extern "C" __global__ void __launch_bounds__(block_size_x)
spmv(const int* __restrict__ row_ptr, const int* __restrict__ col, const T* __restrict__ val,
     const T* __restrict__ x, T* __restrict__ y, T* carry_val, int* carry_row, unsigned int* counter,
     int rows, int cols) {
#if variant == 0 || variant == 1
    // the block's rows: [first, first + block_size_x * row_iters); thread t takes first + t + i * block
    const int first = blockIdx.x * (block_size_x * row_iters);
#if variant == 1
    __shared__ T window[block_size_x * row_iters];
    const int window_end = min(min(first + block_size_x * row_iters, rows), cols);
    for (int i = first + threadIdx.x; i < window_end; i += block_size_x) window[i - first] = load_x(x, i);
    __syncthreads();
#endif
#pragma unroll
    for (int i = 0; i < row_iters; i++) {
        int row = first + threadIdx.x + i * block_size_x;
        if (row >= rows) break;
        int begin = row_ptr[row], end = row_ptr[row + 1];
#if variant == 0
        y[row] = strided_dot(col, val, x, begin, end, 1);
#else
        T sum = 0;
        for (int k = begin; k < end; k++) {
            int j = load_col(col, k);
            T xj = (j >= first && j < window_end) ? window[j - first] : load_x(x, j);
            sum += load_val(val, k) * xj;
        }
        y[row] = sum;
#endif
    }
#elif variant == 2
    constexpr int groups = block_size_x / threads_per_row;
    const int lane = threadIdx.x % threads_per_row;
    const int first = blockIdx.x * (groups * row_iters) + threadIdx.x / threads_per_row;
#pragma unroll
    for (int i = 0; i < row_iters; i++) {
        int row = first + i * groups;
        T sum = 0;
        if (row < rows) sum = strided_dot(col, val, x, row_ptr[row] + lane, row_ptr[row + 1], threads_per_row);
        sum = group_sum(sum, threads_per_row);  // every lane of the warp takes part, in or out of range
        if (lane == 0 && row < rows) y[row] = sum;
    }
#elif variant == 3  // nonzero split
    __shared__ int bounds[2];
    __shared__ T partial[32];
    __shared__ bool last_block;
    const int nnz = row_ptr[rows];
    const int chunk = (int)(((long long)nnz + gridDim.x - 1) / gridDim.x);
    const int start = (int)min((long long)blockIdx.x * chunk, (long long)nnz);
    const int stop = (int)min((long long)start + chunk, (long long)nnz);
    const bool final_block = blockIdx.x == gridDim.x - 1;
    if (threadIdx.x < 32) {
        int r0 = warp_lower_bound(row_ptr, rows, start, threadIdx.x);
        int r1 = final_block ? rows : warp_lower_bound(row_ptr, rows, stop, threadIdx.x);
        if (threadIdx.x == 0) bounds[0] = r0, bounds[1] = r1;
    }
    __syncthreads();
    const int r0 = bounds[0], r1 = bounds[1];

    // the leading piece [start, row_ptr[r0]) belongs to row r0 - 1, begun in an earlier block
    const int lead_end = min(row_ptr[r0], stop);
    T lead = strided_dot(col, val, x, start + threadIdx.x, lead_end, block_size_x);
    lead = block_sum(lead, partial);
    if (threadIdx.x == 0) {
        carry_row[blockIdx.x] = lead_end > start ? r0 - 1 : -1;
        carry_val[blockIdx.x] = lead;
    }

    // own rows: those that start in [start, stop), cut at stop (the rest is a later block's lead)
    const int lane = threadIdx.x % threads_per_row;
    for (int base = r0; base < r1; base += block_size_x / threads_per_row) {  // uniform trip count: shuffles
        int row = base + threadIdx.x / threads_per_row;
        T sum = 0;
        if (row < r1) sum = strided_dot(col, val, x, row_ptr[row] + lane, min(row_ptr[row + 1], stop), threads_per_row);
        sum = group_sum(sum, threads_per_row);
        if (lane == 0 && row < r1) y[row] = sum;
    }

    // the last block to finish adds every block's carry into its row (after all own rows are stored)
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_block = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;  // wraps to 0
    __syncthreads();
    if (last_block) {
        for (int b = threadIdx.x; b < gridDim.x; b += block_size_x) {
            int row = __ldcg(carry_row + b);
            if (row >= 0) atomicAdd(y + row, __ldcg(carry_val + b));
        }
    }
#else  // variant 4: nonzero split through shared memory
    constexpr int chunk = block_size_x * row_iters;
    __shared__ T products[chunk];
    __shared__ int bounds[2];
    __shared__ T partial[32];
    __shared__ bool last_block;
    const int nnz = row_ptr[rows];
    const int start = (int)min((long long)blockIdx.x * chunk, (long long)nnz);
    const int stop = (int)min((long long)start + chunk, (long long)nnz);
    if (threadIdx.x < 32) {
        int r0 = warp_lower_bound(row_ptr, rows, start, threadIdx.x);
        int r1 = blockIdx.x == gridDim.x - 1 ? rows : warp_lower_bound(row_ptr, rows, stop, threadIdx.x);
        if (threadIdx.x == 0) bounds[0] = r0, bounds[1] = r1;
    }
    {  // the block's products: first every column index and value, then the gathers of x
        int c[row_iters];
        T v[row_iters];
#pragma unroll
        for (int i = 0; i < row_iters; i++) {
            int k = start + threadIdx.x + i * block_size_x;
            c[i] = k < stop ? load_col(col, k) : 0;
            v[i] = k < stop ? load_val(val, k) : T(0);
        }
#pragma unroll
        for (int i = 0; i < row_iters; i++) {
            int k = start + threadIdx.x + i * block_size_x;
            if (k < stop) products[k - start] = v[i] * load_x(x, c[i]);
        }
    }
    __syncthreads();
    const int r0 = bounds[0], r1 = bounds[1];

    // the leading piece [start, row_ptr[r0]) belongs to row r0 - 1, begun in an earlier block
    const int lead_end = min(row_ptr[r0], stop);
    T lead = 0;
    for (int k = start + threadIdx.x; k < lead_end; k += block_size_x) lead += products[k - start];
    lead = block_sum(lead, partial);
    if (threadIdx.x == 0) {
        carry_row[blockIdx.x] = lead_end > start ? r0 - 1 : -1;
        carry_val[blockIdx.x] = lead;
    }

    // own rows: those that start in [start, stop), cut at stop (the rest is a later block's lead)
    const int lane = threadIdx.x % threads_per_row;
    for (int base = r0; base < r1; base += block_size_x / threads_per_row) {  // uniform trip count: shuffles
        int row = base + threadIdx.x / threads_per_row;
        T sum = 0;
        if (row < r1) {
            int end = min(row_ptr[row + 1], stop);
            for (int k = row_ptr[row] + lane; k < end; k += threads_per_row) sum += products[k - start];
        }
        sum = group_sum(sum, threads_per_row);
        if (lane == 0 && row < r1) y[row] = sum;
    }

    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_block = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;  // wraps to 0
    __syncthreads();
    if (last_block) {
        for (int b = threadIdx.x; b < gridDim.x; b += block_size_x) {
            int row = __ldcg(carry_row + b);
            if (row >= 0) atomicAdd(y + row, __ldcg(carry_val + b));
        }
    }
#endif
}
