// CSR sparse matrix-vector product y = A x in ONE launch: the two kernels of seed 001 (one thread per
// row; the same with a shared-memory copy of the slice of x that the block's rows share) and what the
// literature does beyond them (several threads per row with shuffle reductions, several rows per
// thread group, read-only and streaming cache hints, unrolling, and load-balanced variants for skewed
// row lengths: a nonzero split and a merge path), selected by `variant`.
//
// Signature and buffers:
//   row_ptr    rows + 1 int32 offsets (row_ptr[0] = 0, row_ptr[rows] = nnz)
//   col        nnz int32 column indices (< cols)
//   val        nnz values of T
//   x          cols values of T
//   y          rows values of T: written (never accumulated into), so repeated launches give the same y
//   carry_val  >= 2 * gridDim.x values of T   variants 3, 4: [b] block b's partial sum of the row it does
//   carry_row  >= gridDim.x int32             not own, carry_row[b] that row; variant 5: [2b] and [2b + 1]
//                                             tile b's parts of the rows that cross its end and its start
//   counter    >= gridDim.x + 1 unsigned int, 0 before the first launch, left at 0 by every launch:
//              [0] blocks finished (variants 3, 4); [1 + b] tiles counted in for the row that tile b begins
//              and that crosses its end (variants 5, 6)
//   rows, cols matrix shape
// Launch: 1-D block of block_size_x threads; 1-D grid of
//         ceil(rows / (block_size_x / threads_per_row * row_iters)) blocks (variants 0-3),
//         max(1, ceil(nnz / (block_size_x * row_iters))) blocks (variants 4 and 6; variant 6 relies on it), or
//         ceil((rows + nnz) / (block_size_x * row_iters)) blocks (variant 5).
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
//                    5 merge path: the merge of row ends and nonzeros is cut into tiles of block_size_x *
//                      row_iters items, row_iters per thread, so rows and nonzeros are balanced together
//                      (empty and dense rows alike); products go through shared memory as in variant 4;
//                      rows that cross threads are joined by a scan by key over the block, rows that cross
//                      tiles by the last of their tiles to finish.
//                    6 nonzero split, short latency chain (CSR-stream 2): chunks as in variant 4, loaded `vec`
//                      elements at a time; only the last block reads nnz, the two row searches run in two warps
//                      while the block's loads are in flight; a block sums the rows that END in its chunk (row
//                      ends from a shared-memory window of row_ptr, tpr lanes per short row, a whole warp per
//                      longer one); a short row that began in the previous chunk has its first part summed
//                      from global memory here, so no fix-up, fence or atomic is needed for it; only rows longer
//                      than LONG that cross chunks are joined by the last of their chunks to finish (variant 5's
//                      scheme).
//   block_size_x     threads per block
//   threads_per_row  lanes per row (power of two, <= 32); 1 for variants 0 and 1; unused by variant 5
//   row_iters        rows each thread group handles (variants 0-2); for variant 3 it only sets C;
//                    for variant 4 the nonzeros each thread loads; for variant 5 the items each thread takes
//   unroll           loads in flight per lane in the inner loop (1, 2, 4)
//   ldg              1: x through the read-only data cache (__ldg)
//   stream           1: val and col loaded with evict-first hints (__ldcs): they are read once, so x
//                    keeps more of the cache
//   vec              elements of col and val per load (1, 2, 4: 4-, 8- or 16-byte loads; variant 6 only)
//   full_occupancy   1: __launch_bounds__ asks for 2048 / block_size_x blocks per SM, i.e. at most 32
//                    registers a thread (variant 6 only; ptxas may spill)

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
#ifndef vec
#define vec 1
#endif
#ifndef full_occupancy
#define full_occupancy 0
#endif

#if variant < 0 || variant > 6
#error "variant must be 0..6"
#endif
#if vec != 1 && vec != 2 && vec != 4
#error "vec must be 1, 2 or 4"
#endif
#if vec != 1 && (variant != 6 || row_iters % vec != 0)
#error "vec > 1: variant 6 only, with row_iters a multiple of vec"
#endif
#if full_occupancy && variant != 6
#error "full_occupancy: variant 6 only"
#endif
#if full_occupancy
#define LAUNCH_BOUNDS __launch_bounds__(block_size_x, 2048 / block_size_x)
#else
#define LAUNCH_BOUNDS __launch_bounds__(block_size_x)
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
#if variant == 5 && block_size_x < 64
#error "the merge-path variant searches a block's two ends with two warps"
#endif

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ T load_x(const T* __restrict__ x, int j) {
#if ldg
    return __ldg(x + j);
#else
    return x[j];
#endif
}

// val and col entries are read once: with `stream`, evict-first loads keep more of x in the caches
template <typename V>
__device__ __forceinline__ V load_stream(const V* __restrict__ p, int k) {
#if stream
    return __ldcs(p + k);
#else
    return p[k];
#endif
}

// N consecutive elements from p + k (k a multiple of N, p 16-byte aligned) in 4-, 8- or 16-byte loads
template <int N, typename V>
__device__ __forceinline__ void load_run(const V* __restrict__ p, int k, V* out) {
    constexpr int bytes = N * (int)sizeof(V);
    if constexpr (bytes >= 16) {
#pragma unroll
        for (int q = 0; q < bytes / 16; q++) {
            union { int4 w; V e[16 / sizeof(V)]; } u;
            u.w = load_stream(reinterpret_cast<const int4*>(p + k), q);
#pragma unroll
            for (int j = 0; j < 16 / (int)sizeof(V); j++) out[q * (16 / (int)sizeof(V)) + j] = u.e[j];
        }
    } else if constexpr (bytes == 8) {
        union { int2 w; V e[8 / sizeof(V)]; } u;
        u.w = load_stream(reinterpret_cast<const int2*>(p + k), 0);
#pragma unroll
        for (int j = 0; j < 8 / (int)sizeof(V); j++) out[j] = u.e[j];
    } else {
        out[0] = load_stream(p, k);
    }
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
            c[u] = load_stream(col, k + u * step);
            v[u] = load_stream(val, k + u * step);
        }
#pragma unroll
        for (int u = 0; u < unroll; u++) sum += v[u] * load_x(x, c[u]);
    }
#endif
    for (; k < end; k += step) sum += load_stream(val, k) * load_x(x, load_stream(col, k));
    return sum;
}

// sum over the `width` lanes of a group (lane 0 of the group gets it); every lane of the warp calls it
__device__ __forceinline__ T group_sum(T sum, int width) {
    for (int offset = width / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(FULL_MASK, sum, offset, width);
    return sum;
}

#if variant >= 3
// first r in [0, n] with row_ptr[r] + with_index * r >= target (a nondecreasing sequence; r = n must
// qualify): each step probes 32 positions at once, so about log32(n) dependent loads instead of log2(n).
// All 32 lanes call it. with_index = 1 searches the merge path of row ends and nonzeros (variant 5).
__device__ int warp_lower_bound(const int* __restrict__ row_ptr, int n, long long target, int with_index, int lane) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int stride = (hi - lo + 31) / 32;
        int probe = lo + lane * stride;
        bool ge = probe >= hi || (long long)row_ptr[probe] + (long long)with_index * probe >= target;
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

#if variant == 6
// first r in [0, n] with row_ptr[r] >= target (r = n must qualify), probing K positions at a time with lanes
// 0..K-1 (all 32 lanes call it): more steps than with 32, but fewer distinct lines asked of L2 per search
// (and the top levels, alike for every block, stay in L1), which counts where the gathers of x keep L2 busy
template <int K>
__device__ int lower_bound_k(const int* __restrict__ row_ptr, int n, int target, int lane) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int stride = (hi - lo + K - 1) / K;
        const int probe = lo + lane * stride;
        const bool ge = lane >= K || probe >= hi || __ldg(row_ptr + probe) >= target;
        const int first = __ffs(__ballot_sync(FULL_MASK, ge)) - 1;  // <= K
        const int new_hi = min(lo + first * stride, hi);
        lo = first == 0 ? lo : lo + (first - 1) * stride + 1;
        hi = new_hi;
    }
    return lo;
}
#endif

// the last block to finish adds every block's carry (a partial sum of a row that a later block stores)
// into its row; all blocks call it after storing their rows. `counter` wraps back to 0 for the next launch.
__device__ void add_carries(T* __restrict__ y, const T* carry_val, const int* carry_row, unsigned int* counter) {
    __shared__ bool last_block;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_block = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;
    __syncthreads();
    if (last_block) {
        for (int b = threadIdx.x; b < gridDim.x; b += block_size_x) {
            int row = __ldcg(carry_row + b);
            if (row >= 0) atomicAdd(y + row, __ldcg(carry_val + b));
        }
    }
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

#if variant == 5
// inclusive scan by key over a warp: each lane gets the sum of the values of the lanes up to it whose key
// equals its own. Keys must be nondecreasing over the lanes (rows, in merge order).
__device__ __forceinline__ T warp_scan_by_key(int key, T value, int lane) {
    for (int offset = 1; offset < 32; offset *= 2) {
        int other_key = __shfl_up_sync(FULL_MASK, key, offset);
        T other = __shfl_up_sync(FULL_MASK, value, offset);
        if (lane >= offset && other_key == key) value += other;
    }
    return value;
}
#endif

extern "C" __global__ void LAUNCH_BOUNDS
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
            int j = load_stream(col, k);
            T xj = (j >= first && j < window_end) ? window[j - first] : load_x(x, j);
            sum += load_stream(val, k) * xj;
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
    const int nnz = row_ptr[rows];
    const int chunk = (int)(((long long)nnz + gridDim.x - 1) / gridDim.x);
    const int start = (int)min((long long)blockIdx.x * chunk, (long long)nnz);
    const int stop = (int)min((long long)start + chunk, (long long)nnz);
    const bool final_block = blockIdx.x == gridDim.x - 1;
    if (threadIdx.x < 32) {
        int r0 = warp_lower_bound(row_ptr, rows, start, 0, threadIdx.x);
        int r1 = final_block ? rows : warp_lower_bound(row_ptr, rows, stop, 0, threadIdx.x);
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

    add_carries(y, carry_val, carry_row, counter);
#elif variant == 4  // nonzero split through shared memory
    constexpr int chunk = block_size_x * row_iters;
    __shared__ T products[chunk];
    __shared__ int bounds[2];
    __shared__ T partial[32];
    const int nnz = row_ptr[rows];
    const int start = (int)min((long long)blockIdx.x * chunk, (long long)nnz);
    const int stop = (int)min((long long)start + chunk, (long long)nnz);
    if (threadIdx.x < 32) {
        int r0 = warp_lower_bound(row_ptr, rows, start, 0, threadIdx.x);
        int r1 = blockIdx.x == gridDim.x - 1 ? rows : warp_lower_bound(row_ptr, rows, stop, 0, threadIdx.x);
        if (threadIdx.x == 0) bounds[0] = r0, bounds[1] = r1;
    }
    {  // the block's products: first every column index and value, then the gathers of x
        int c[row_iters];
        T v[row_iters];
#pragma unroll
        for (int i = 0; i < row_iters; i++) {
            int k = start + threadIdx.x + i * block_size_x;
            c[i] = k < stop ? load_stream(col, k) : 0;
            v[i] = k < stop ? load_stream(val, k) : T(0);
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

    add_carries(y, carry_val, carry_row, counter);
#elif variant == 6  // nonzero split, short latency chain
    // Block b takes the nonzeros [start, stop) = [b * chunk, min((b + 1) * chunk, nnz)) (the grid has exactly
    // ceil(nnz / chunk) blocks, so only the last one needs nnz). It stores the rows that END in its chunk:
    // [ra, rb), ra = the first row with row_ptr[ra + 1] > start (0 for block 0), rb = the first row with
    // row_ptr[rb + 1] > stop (rows for the last block). Row ra may have begun in an earlier chunk: when it is
    // at most LONG long, warp 0 sums its earlier part from global memory (head 1), so no other block takes
    // part in it; a longer row that crosses chunks is summed by the last of its chunks to finish, each chunk
    // publishing its part (head 2 where it ends, tail where it goes on: variant 5's scheme). Only ra is
    // searched for (8 probes a step); rb follows from the window of row_ptr that the block reads anyway.
    constexpr int chunk = block_size_x * row_iters;
    constexpr int LONG = chunk < 512 ? chunk : 512;     // crossing rows up to LONG: no fix-up
    constexpr int WROWS = 4 * block_size_x;             // row_ptr entries held in shared memory at a time
    constexpr int DEFER = 16 * threads_per_row;         // longer rows are summed by a whole warp
    constexpr int MAX_DEFER = chunk / (DEFER + 1) + 1;  // the rows of one chunk longer than DEFER
    constexpr int groups = block_size_x / threads_per_row;
    __shared__ __align__(16) T products[chunk];
    __shared__ int rp[WROWS + 1];
    __shared__ int deferred_row[MAX_DEFER], deferred_begin[MAX_DEFER], deferred_end[MAX_DEFER];
    __shared__ int n_deferred, window_rows;
    __shared__ int info[2];   // ra, head (0, 1: short row begun earlier, 2: long one)
    __shared__ T pre_sum, parts[2];  // head 1: the part before start; head 2 / tail: this chunk's part
    const int warp = threadIdx.x / 32, lane32 = threadIdx.x % 32;
    const int start = blockIdx.x * chunk;
    const bool last_block = blockIdx.x == gridDim.x - 1;
    const int stop = last_block ? row_ptr[rows] : start + chunk;
    const int n = stop - start;
    {
        // every column index and value of the block's share first, then the gathers of x, then (while they
        // are in flight) the row search, then the products
        int c[row_iters];
        T v[row_iters], xs[row_iters];
        if (n == chunk) {  // every block but (maybe) the last: no bounds to check
#pragma unroll
            for (int i = 0; i < row_iters / vec; i++) {
                const int off = (i * block_size_x + (int)threadIdx.x) * vec;
                load_run<vec>(col, start + off, c + i * vec);
                load_run<vec>(val, start + off, v + i * vec);
            }
#pragma unroll
            for (int i = 0; i < row_iters; i++) xs[i] = load_x(x, c[i]);
        } else {
#pragma unroll
            for (int i = 0; i < row_iters / vec; i++) {
                const int off = (i * block_size_x + (int)threadIdx.x) * vec;
#pragma unroll
                for (int u = 0; u < vec; u++) {
                    const bool in = off + u < n;
                    c[i * vec + u] = in ? load_stream(col, start + off + u) : 0;
                    v[i * vec + u] = in ? load_stream(val, start + off + u) : T(0);
                    xs[i * vec + u] = in ? load_x(x, c[i * vec + u]) : T(0);
                }
            }
        }
        if (warp == 0) {
            const int ra = blockIdx.x == 0 ? 0 : lower_bound_k<8>(row_ptr, rows, start + 1, lane32) - 1;
            int head = 0;
            T pre = 0;
            if (blockIdx.x > 0) {
                const int b = row_ptr[ra], e = row_ptr[ra + 1];
                if (b < start && e <= stop) {
                    head = e - b <= LONG ? 1 : 2;
                    if (head == 1) pre = group_sum(strided_dot(col, val, x, b + lane32, start, 32), 32);
                }
            }
            if (lane32 == 0) info[0] = ra, info[1] = head, pre_sum = pre, n_deferred = 0;
        }
#pragma unroll
        for (int i = 0; i < row_iters / vec; i++) {
            const int off = (i * block_size_x + (int)threadIdx.x) * vec;
#pragma unroll
            for (int u = 0; u < vec; u++)
                if (off + u < n) products[off + u] = v[i * vec + u] * xs[i * vec + u];
        }
    }
    __syncthreads();
    const int ra = info[0], head = info[1];

    // the rows that end here, WROWS at a time: rp[j] = row_ptr[w0 + j] (INT_MAX past the last row); the
    // window's rows that end by stop are a prefix [0, wn) of it; tpr lanes per row, rows longer than DEFER
    // left to a warp
    const int lane = threadIdx.x % threads_per_row;
    int w0 = ra, wn;
    while (true) {  // block-uniform
        if (threadIdx.x == 0) window_rows = WROWS;
        for (int j = threadIdx.x; j <= WROWS; j += block_size_x) rp[j] = w0 + j <= rows ? row_ptr[w0 + j] : 0x7fffffff;
        __syncthreads();
        for (int j = 1 + threadIdx.x; j <= WROWS; j += block_size_x)
            if (rp[j] > stop && rp[j - 1] <= stop) window_rows = j - 1;  // rp[0] <= stop: at most one such j
        __syncthreads();
        wn = window_rows;
        for (int base = 0; base < wn; base += groups) {  // uniform trip count: shuffles
            const int j = base + (int)threadIdx.x / threads_per_row;
            T sum = 0;
            bool deferred = false;
            if (j < wn) {
                const int b = max(rp[j] - start, 0), e = rp[j + 1] - start;
                deferred = e - b > DEFER;
                if (!deferred) {
                    for (int k = b + lane; k < e; k += threads_per_row) sum += products[k];
                } else if (lane == 0) {
                    const int d = atomicAdd(&n_deferred, 1);
                    deferred_row[d] = w0 + j, deferred_begin[d] = b, deferred_end[d] = e;
                }
            }
            sum = group_sum(sum, threads_per_row);
            if (lane == 0 && j < wn && !deferred) {
                const int r = w0 + j;
                if (r == ra && head == 1) y[r] = sum + pre_sum;
                else if (r == ra && head == 2) parts[0] = sum;
                else y[r] = sum;
            }
        }
        if (wn < WROWS) break;
        __syncthreads();  // before rp is loaded again
        w0 += WROWS;
    }
    // row rb = w0 + wn goes on after stop: when it is long and has nonzeros here, this chunk's part counts
    const int rb = w0 + wn;
    const bool tail = !last_block && rp[wn] < stop && rp[wn + 1] - rp[wn] > LONG;
    const int tail_begin = max(rp[wn] - start, 0);
    __syncthreads();  // the deferred rows are all listed

    // the long rows, and this chunk's part of a long row that goes on after it: a warp each
    const int nd = n_deferred;
    for (int d = warp; d < nd + tail; d += block_size_x / 32) {
        const bool is_tail = d == nd;
        const int b = is_tail ? tail_begin : deferred_begin[d], e = is_tail ? n : deferred_end[d];
        T sum = 0;
#pragma unroll 4
        for (int k = b + lane32; k < e; k += 32) sum += products[k];
        sum = group_sum(sum, 32);
        if (lane32 == 0) {
            const int r = is_tail ? -1 : deferred_row[d];
            if (is_tail) parts[1] = sum;
            else if (r == ra && head == 1) y[r] = sum + pre_sum;
            else if (r == ra && head == 2) parts[0] = sum;
            else y[r] = sum;
        }
    }
    if (head == 2 || tail) {  // block-uniform
        __syncthreads();
        if (warp == 0) {
#pragma unroll
            for (int role = 0; role < 2; role++) {  // 0: row ra (ends here), 1: row rb (goes on after this chunk)
                if (role == 0 ? head != 2 : !tail) continue;
                const int r = role == 0 ? ra : rb;
                const int first_tile = row_ptr[r] / chunk, last_tile = (row_ptr[r + 1] - 1) / chunk;
                unsigned int counted = 0;
                if (lane32 == 0) {
                    carry_val[2 * blockIdx.x + 1 - role] = parts[role];  // tail parts at even, heads at odd
                    __threadfence();
                    counted = atomicAdd(counter + 1 + first_tile, 1u);
                }
                if (__shfl_sync(FULL_MASK, counted, 0) == (unsigned int)(last_tile - first_tile)) {
                    __threadfence();
                    T total = 0;
                    for (int b = first_tile + lane32; b < last_tile; b += 32) total += __ldcg(carry_val + 2 * b);
                    total = group_sum(total, 32);
                    if (lane32 == 0) {
                        y[r] = total + __ldcg(carry_val + 2 * last_tile + 1);
                        counter[1 + first_tile] = 0;  // every chunk of the row has counted: ready for the next launch
                    }
                }
            }
        }
    }
#else  // variant 5: merge path
    // The merge of the row ends (row_ptr[1..rows]) with the nonzero indices 0..nnz-1 is cut into tiles of
    // block_size_x * row_iters items, each thread taking row_iters consecutive ones, so every block and every
    // thread gets the same number of rows plus nonzeros, whatever the row lengths (Merrill & Garland).
    // The merge-path point (i, j) at diagonal d = i + j: i = the rows whose end comes before the d-th item,
    // i.e. the last i with row_ptr[i] + i <= d.
    constexpr int tile = block_size_x * row_iters;
    // products[k] at k + k / 32: threads walk runs of about row_iters items, and the padding spreads their
    // starts over the banks (exactly so where the runs are 8 or 16 nonzeros long)
    __shared__ T products[tile + tile / 32];
    __shared__ int row_end[tile + 1];
    __shared__ int corner[4];  // the tile's first merge-path point (i0, j0) and its end (i1, j1)
    __shared__ int warp_key[block_size_x / 32];
    __shared__ T warp_total[block_size_x / 32];
    __shared__ T head_tail[2];  // this tile's part of row i0 (when it began earlier) and of row i1
    const int nnz = row_ptr[rows];
    const long long items = (long long)rows + nnz;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp < 2) {  // warp 0 finds the tile's start, warp 1 its end
        long long d = min((long long)(blockIdx.x + warp) * tile, items);
        int i = d == items ? rows : warp_lower_bound(row_ptr, rows, d + 1, 1, lane) - 1;
        if (lane == 0) corner[2 * warp] = i, corner[2 * warp + 1] = (int)(d - i);
    }
    __syncthreads();
    const int i0 = corner[0], j0 = corner[1], i1 = corner[2], j1 = corner[3];
    const int tile_rows = i1 - i0, tile_items = tile_rows + (j1 - j0);
    {  // the tile's products (column indices and values first, then the gathers of x) and row ends
        int c[row_iters];
        T v[row_iters];
#pragma unroll
        for (int u = 0; u < row_iters; u++) {
            int k = j0 + threadIdx.x + u * block_size_x;
            c[u] = k < j1 ? load_stream(col, k) : 0;
            v[u] = k < j1 ? load_stream(val, k) : T(0);
        }
        // ends of rows i0 .. i1 (i1's only where it exists: the tile's last items may lie in it)
        for (int r = threadIdx.x; r <= tile_rows; r += block_size_x)
            row_end[r] = i0 + r < rows ? row_ptr[i0 + r + 1] : 0x7fffffff;
#pragma unroll
        for (int u = 0; u < row_iters; u++) {
            int k = j0 + threadIdx.x + u * block_size_x;
            if (k < j1) products[(k - j0) + (k - j0) / 32] = v[u] * load_x(x, c[u]);
        }
    }
    __syncthreads();

    // this thread's items [d, d_end) of the tile: its merge-path point by binary search in shared memory
    const int d = min((int)threadIdx.x * row_iters, tile_items), d_end = min(d + row_iters, tile_items);
    int lo = max(0, d - (j1 - j0)), hi = min(d, tile_rows);
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (row_end[mid] <= j0 + d - mid - 1) lo = mid + 1; else hi = mid;
    }
    int row = lo, k = d - lo;  // tile-relative row and nonzero
    // walk: a nonzero adds to the running sum, a row end stores it. Every row but the thread's first ends
    // where it began, here; the first may have begun in earlier threads, so it waits for their partial sums.
    T sum = 0, first_sum = 0;
    int first_row = -1;
#pragma unroll
    for (int s = 0; s < row_iters; s++) {
        if (d + s < d_end) {
            if (j0 + k < row_end[row]) {
                sum += products[k + k / 32];
                k++;
            } else {
                if (first_row < 0) first_row = row, first_sum = sum;
                else y[i0 + row] = sum;
                sum = 0;
                row++;
            }
        }
    }

    // partial sums of the rows that cross threads: scan by key (key = the row a thread ends in) over the block
    T inclusive = warp_scan_by_key(row, sum, lane);
    if (lane == 31) warp_key[warp] = row, warp_total[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        int key = lane < block_size_x / 32 ? warp_key[lane] : 0x7fffffff;
        T total = warp_scan_by_key(key, lane < block_size_x / 32 ? warp_total[lane] : T(0), lane);
        __syncwarp();
        if (lane < block_size_x / 32) warp_total[lane] = total;
    }
    __syncthreads();
    // what the threads before this one hold of the row it begins in (exclusive scan by key)
    int before_key = __shfl_up_sync(FULL_MASK, row, 1);
    T before = __shfl_up_sync(FULL_MASK, inclusive, 1);
    if (lane == 0) before_key = warp > 0 ? warp_key[warp - 1] : -1, before = warp > 0 ? warp_total[warp - 1] : T(0);
    else if (warp > 0 && before_key == warp_key[warp - 1]) before += warp_total[warp - 1];
    // a row that crosses tiles is summed by the last of its tiles to finish (no wait, no global fix-up):
    // the tile that closes it (head) and every tile whose end lies in it (tail) publish their partial sum
    // and count themselves in at the row's first tile; the last to count adds the parts and stores the row
    const bool head_crosses = tile_rows > 0 && row_ptr[i0] < j0;  // row i0 began in an earlier tile
    if (first_row >= 0) {
        T value = first_sum + (before_key == first_row ? before : T(0));
        if (first_row == 0 && head_crosses) head_tail[0] = value;
        else y[i0 + first_row] = value;
    }
    if (threadIdx.x == block_size_x - 1) head_tail[1] = sum + (before_key == row ? before : T(0));
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int role = 0; role < 2; role++) {  // 0: row i0 (closed here), 1: row i1 (goes on after this tile)
            const int r = role == 0 ? i0 : i1;
            if (role == 0 ? !head_crosses : (i1 >= rows || row_ptr[i1] >= j1)) continue;
            const int first_tile = (int)(((long long)r + row_ptr[r]) / tile);
            const int last_tile = (int)(((long long)r + row_ptr[r + 1]) / tile);
            unsigned int counted = 0;
            if (lane == 0) {
                carry_val[2 * blockIdx.x + 1 - role] = head_tail[role];  // tail parts at even, heads at odd
                __threadfence();
                counted = atomicAdd(counter + 1 + first_tile, 1u);
            }
            if (__shfl_sync(FULL_MASK, counted, 0) == (unsigned int)(last_tile - first_tile)) {
                __threadfence();
                T total = 0;
                for (int b = first_tile + lane; b < last_tile; b += 32) total += __ldcg(carry_val + 2 * b);
                total = group_sum(total, 32);
                if (lane == 0) {
                    y[r] = total + __ldcg(carry_val + 2 * last_tile + 1);
                    counter[1 + first_tile] = 0;  // every tile of the row has counted: ready for the next launch
                }
            }
        }
    }
#endif
}
