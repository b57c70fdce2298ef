// Dense matrix multiplication C = A . B (row-major A: M x K, B: K x N, C: M x N), one kernel whose
// #define parameters span the seeds' hand-tuned versions (002: naive, coalesced A, A and B in shared
// memory; 004: "merged threads") and what fast hand-written SGEMMs do (register-tiled, variant 4), and a
// tensor-core float32 GEMM that keeps float32 accuracy by 3xTF32 error compensation (variant 5).
//
// Signature: gemm(const T* A, const T* B, T* C, int M, int N, int K, T* accum, T* partials, int* counters);
// any M, N, K >= 1 (tiles at the edges are guarded; vector loads are used only where the row length keeps
// them aligned). The last three are split-K's workspace (variants 4 and 5 with split_k > 1; the others
// ignore them): accum M x N and counters (one per output tile of 32 x 32 or more) all zero before the first
// launch, and left zero by every launch; partials split_k x M x N, any contents.
// Launch: block (block_size_x, block_size_y, k_groups),
//         grid (ceil(N / (block_size_x * tile_n)), ceil(M / (block_size_y * tile_m)), split_k).
//
// Types: T is float or int (prepended as `#define T ...`, not -DT: CUDA 13 headers use T as a name);
// variant 5 is float only (TF32 tensor cores; its int build fails with an #error naming why).
//
// Tunable parameters (Kernel Tuner prepends `#define name value`):
//   variant  1 naive: one output per thread, A and B from global memory (seed 002)
//            2 coalesced A: the A tile (block_size_y x block_size_x) in shared memory, B from global
//              (seed 002; square tile = block)
//            3 A and B tiles (T x T, T = block_size_x) in shared memory; each thread computes tile_m
//              outputs in rows block_size_y apart, block_size_y = T / tile_m ("merged threads",
//              seed 004; tile_m = 1 is seed 002's "reduced global" version)
//            4 register-tiled: block tile BM x BN x BK = (block_size_y * tile_m) x (block_size_x * tile_n)
//              x tile_k; each thread computes tile_m x tile_n outputs as (tile_m/4) x (tile_n/4) chunks of
//              4 x 4 spread over the block tile (so its shared loads are float4 and conflict-free); A is
//              stored transposed in shared memory; threads are grouped into warp tiles of
//              warp_x x (32 / warp_x) threads; optional double buffering and float4 global loads.
//            5 3xTF32 tensor cores (sm_80+, mma.sync m16n8k8): each float x is split into big = tf32(x) and
//              small = tf32(x - big), and acc += a_small b_big + a_big b_small + a_big b_big in float32
//              accumulators (a_small b_small, about 2^-22 of a b, is dropped). Warps of 4 x 8 threads
//              (lanes along N x along M, the mma's accumulator layout), block_size_x / 4 x block_size_y / 8
//              warps, each a warp tile of (8 tile_m) x (4 tile_n) outputs of m16n8 tiles; block tile as
//              variant 4's, BM x BN x BK = (block_size_y * tile_m) x (block_size_x * tile_n) x tile_k;
//              A and B tiles go global -> shared by cp.async (16 B where aligned, 4 B elsewhere, zero-filled
//              past the edges) into a `stages`-deep ring, XOR-swizzled so that both the copies and the
//              fragment loads (ldmatrix for A, 32-bit loads for B) are free of bank conflicts.
//   block_size_x, block_size_y  thread block shape
//   tile_m, tile_n  outputs per thread in M and N (variant 3: tile_m only; variants 1, 2: 1)
//   tile_k   BK of variants 4 and 5 (variants 1-3: = block_size_x, the tile width)
//   stages   variant 5: shared-memory stages of the cp.async pipeline (2-4); 0 for the others
//   rn_sum   variant 5: where each k-step's three products are summed. 0 = by the tensor core into the
//            accumulators (each mma rounds the running sum toward zero: 3K/8 biased roundings; modelled in
//            numpy, the largest error is about half the workload's float32 tolerance at K = 256..4096);
//            1 = by the tensor core from zero into 4 registers, then added to the accumulators by float32
//            adds (K/8 roundings to nearest), 4 adds per 3 mma's
//   warp_x   variant 4: threads of a warp along N (the warp covers warp_x x 32/warp_x threads)
//   double_buffer  variant 4: 1 = two shared-memory stages, the next tile is fetched into registers
//                  while the current one is multiplied (one barrier per tile); 0 = load, sync, compute, sync
//   pad_a    variant 4: floats of padding per row of the transposed A tile (against bank conflicts)
//   vector   variant 4: 4 = float4 (int4) global loads of A and B where aligned, 1 = scalar loads
//   unroll   variants 1-3: 0 = the compiler's default for the inner loop (as the seeds compiled),
//            4 = `#pragma unroll 4`
//   split_k  variants 4, 5: blocks per output tile, each over its own slice of K (whole BK tiles, blockIdx.z);
//            1 = no split. The blocks of a tile count themselves in (counters[tile]); the last one to
//            arrive writes the tile of C and sets the counter back to zero, so no launch needs C or the
//            workspace cleared first, and no block ever waits for another.
//   k_groups variants 4, 5: groups of block_size_x x block_size_y threads in the block (threadIdx.z), each over
//            its own BK tile of every k_groups * BK of K (variant 5: with its own pipeline): the block steps
//            through K k_groups tiles at a time, with k_groups times the warps in flight, and the groups' outputs
//            are summed in shared memory at the end (in group order) -- split-K inside the block, for outputs
//            of few tiles and a long K. 1 = no groups.
//   split_reduce  with split_k > 1, how the slices' partial tiles are summed:
//            0 = atomics: each block adds its partial tile into accum (atomicAdd); the last copies the
//                tile to C and zeroes it in accum again (the order of the sums varies from run to run)
//            1 = workspace: each block stores its partial tile in partials[blockIdx.z]; the last sums the
//                split_k partials in slice order (the same result every run) -- the work a second, small
//                reduction kernel would do, done by the tile's last block instead of a second launch

#ifndef T
#define T float
#endif
#ifndef variant
#define variant 4
#endif
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef tile_m
#define tile_m 8
#endif
#ifndef tile_n
#define tile_n 8
#endif
#ifndef tile_k
#define tile_k 8
#endif
#ifndef warp_x
#define warp_x 8
#endif
#ifndef double_buffer
#define double_buffer 1
#endif
#ifndef pad_a
#define pad_a 4
#endif
#ifndef vector
#define vector 4
#endif
#ifndef unroll
#define unroll 0
#endif
#ifndef split_k
#define split_k 1
#endif
#ifndef split_reduce
#define split_reduce 0
#endif
#ifndef k_groups
#define k_groups 1
#endif
#ifndef stages
#define stages 0
#endif
#ifndef rn_sum
#define rn_sum 0
#endif

#if variant < 1 || variant > 5
#error "variant must be 1..5"
#endif
#if variant == 3 && block_size_y * tile_m != block_size_x
#error "variant 3: block_size_y * tile_m must equal the tile width block_size_x"
#endif
#if variant == 4
#if tile_m % 4 != 0 || tile_n % 4 != 0
#error "variant 4: tile_m and tile_n must be multiples of 4"
#endif
#if (block_size_x * block_size_y) % 32 != 0 || 32 % warp_x != 0 || block_size_x % warp_x != 0 || block_size_y % (32 / warp_x) != 0
#error "variant 4: the block must split into whole warp tiles of warp_x x 32/warp_x threads"
#endif
#if vector != 1 && vector != 4
#error "vector must be 1 or 4"
#endif
#if tile_k % vector != 0
#error "variant 4: tile_k must be a multiple of vector"
#endif
#endif
#if variant == 5
#if block_size_x % 4 != 0 || block_size_y % 8 != 0
#error "variant 5: the block must split into warps of 4 x 8 threads"
#endif
#if (4 * tile_n) % 32 != 0 || (8 * tile_m) % 16 != 0
#error "variant 5: warp tiles of 16k rows x 32k columns (the B swizzle's fragment addressing needs the latter)"
#endif
#if tile_k != 8 && tile_k != 16 && tile_k != 32
#error "variant 5: tile_k must be 8, 16 or 32"
#endif
#if stages < 2 || stages > 4
#error "variant 5: stages must be 2..4"
#endif
#if rn_sum != 0 && rn_sum != 1
#error "variant 5: rn_sum must be 0 or 1"
#endif
#endif
#if split_k < 1 || (split_k > 1 && variant < 4)
#error "split_k > 1 needs variant 4 or 5"
#endif
#if split_reduce != 0 && split_reduce != 1
#error "split_reduce must be 0 or 1"
#endif
#if k_groups < 1 || (k_groups > 1 && variant != 5 && (variant != 4 || !double_buffer))
#error "k_groups > 1 needs variant 4 (double-buffered) or 5"
#endif

#define NTHREADS (block_size_x * block_size_y)

typedef T elem_t;

template <typename E> struct vec4_of;
template <> struct vec4_of<float> { typedef float4 type; };
template <> struct vec4_of<int> { typedef int4 type; };
typedef typename vec4_of<elem_t>::type vec4_t;

__device__ __forceinline__ vec4_t make_vec4(const elem_t (&v)[4])
{
    vec4_t x;
    x.x = v[0]; x.y = v[1]; x.z = v[2]; x.w = v[3];
    return x;
}

#if unroll
#define INNER_UNROLL _Pragma("unroll 4")
#else
#define INNER_UNROLL
#endif

#if variant == 1
// ---- naive: one output per thread ---------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
    const int row = blockIdx.y * block_size_y + threadIdx.y;
    const int col = blockIdx.x * block_size_x + threadIdx.x;
    if (row >= M || col >= N) return;
    elem_t sum = 0;
    const elem_t* a = A + (size_t)row * K;
    INNER_UNROLL
    for (int k = 0; k < K; ++k) sum += a[k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = sum;
}

#elif variant == 2
// ---- coalesced A: the A tile in shared memory, B read from global memory ----------------------
extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
    __shared__ elem_t As[block_size_y][block_size_x];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * block_size_y + ty;
    const int col = blockIdx.x * block_size_x + tx;
    const int bcol = col < N ? col : N - 1;  // threads past the edge load and sync, never store
    elem_t sum = 0;
    for (int k0 = 0; k0 < K; k0 += block_size_x) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : elem_t(0);
        __syncthreads();
        const int kn = min(block_size_x, K - k0);
        if (kn == block_size_x) {
            INNER_UNROLL
            for (int k = 0; k < block_size_x; ++k) sum += As[ty][k] * B[(size_t)(k0 + k) * N + bcol];
        } else {
            for (int k = 0; k < kn; ++k) sum += As[ty][k] * B[(size_t)(k0 + k) * N + bcol];
        }
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = sum;
}

#elif variant == 3
// ---- A and B tiles in shared memory, tile_m outputs per thread ("merged threads") --------------
#define TILE block_size_x
extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
    __shared__ elem_t As[TILE][TILE];
    __shared__ elem_t Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE + ty;  // this thread's rows: row0 + i * block_size_y
    const int col = blockIdx.x * TILE + tx;
    elem_t sum[tile_m];
#pragma unroll
    for (int i = 0; i < tile_m; ++i) sum[i] = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
#pragma unroll
        for (int i = 0; i < tile_m; ++i) {
            const int r = ty + i * block_size_y;
            As[r][tx] = (row0 + i * block_size_y < M && k0 + tx < K)
                            ? A[(size_t)(row0 + i * block_size_y) * K + k0 + tx] : elem_t(0);
            Bs[r][tx] = (k0 + r < K && col < N) ? B[(size_t)(k0 + r) * N + col] : elem_t(0);
        }
        __syncthreads();
        INNER_UNROLL
        for (int k = 0; k < TILE; ++k) {
            const elem_t b = Bs[k][tx];
#pragma unroll
            for (int i = 0; i < tile_m; ++i) sum[i] += As[ty + i * block_size_y][k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < tile_m; ++i)
        if (row0 + i * block_size_y < M && col < N) C[(size_t)(row0 + i * block_size_y) * N + col] = sum[i];
}

#else
// ---- variants 4 and 5: block tile BM x BN x BK; the block's outputs to C, or split-K's partials summed --
#define BM (block_size_y * tile_m)
#define BN (block_size_x * tile_n)
#define BK tile_k
#define KSTEP (BK * k_groups)  // K a block steps through at a time (all groups' tiles)

template <typename E> struct vec2_of;
template <> struct vec2_of<float> { typedef float2 type; };
template <> struct vec2_of<int> { typedef int2 type; };

// A run of W consecutive outputs of a row as one vector load or store (variant 4: W = 4, variant 5: W = 2).
template <int W> struct run_vec;
template <> struct run_vec<4> {
    typedef vec4_t type;
    static __device__ __forceinline__ type pack(const elem_t* v)
    {
        type x;
        x.x = v[0]; x.y = v[1]; x.z = v[2]; x.w = v[3];
        return x;
    }
    static __device__ __forceinline__ void unpack(elem_t* v, const type& x) { v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w; }
};
template <> struct run_vec<2> {
    typedef typename vec2_of<elem_t>::type type;
    static __device__ __forceinline__ type pack(const elem_t* v)
    {
        type x;
        x.x = v[0]; x.y = v[1];
        return x;
    }
    static __device__ __forceinline__ void unpack(elem_t* v, const type& x) { v[0] = x.x; v[1] = x.y; }
};

// Store v[0..W-1] at p (= row start + col): one vector store where aligned and inside, else up to column N.
template <int W>
__device__ __forceinline__ void store_run(elem_t* p, const elem_t* v, int col, int N)
{
    if ((N & (W - 1)) == 0 && col + W - 1 < N) {
        *reinterpret_cast<typename run_vec<W>::type*>(p) = run_vec<W>::pack(v);
    } else {
#pragma unroll
        for (int e = 0; e < W; ++e)
            if (col + e < N) p[e] = v[e];
    }
}

#if split_k > 1
// Load v[0..W-1] from p through L2 (other blocks' writes and atomics; L1 is not coherent), zeros past N.
template <int W>
__device__ __forceinline__ void load_run_l2(elem_t* v, const elem_t* p, int col, int N)
{
    if ((N & (W - 1)) == 0 && col + W - 1 < N) {
        run_vec<W>::unpack(v, __ldcg(reinterpret_cast<const typename run_vec<W>::type*>(p)));
    } else {
#pragma unroll
        for (int e = 0; e < W; ++e) v[e] = col + e < N ? __ldcg(p + e) : elem_t(0);
    }
}
#endif

// Where a run of W outputs of this thread goes (f(v, row, col): v[0..W-1] belong at C[row][col..], row < M;
// columns past N are store_run's to guard): straight to C, or with split-K first this block's slice's partial
// (PUBLISH), then, in the tile's last block, the sum of the slices' partials (SUM). A struct with one call
// operator, not a generic lambda: NVRTC 13.0 takes a lambda with an `auto` parameter in device code for a host
// function and refuses it.
enum RunStage { STORE, PUBLISH, SUM };
template <int W> struct RunSink {
    elem_t* C;
    elem_t* accum;
    elem_t* partials;
    size_t slice;  // M x N: the stride of split_reduce 1's partials, one slice of K each
    int N;
    RunStage stage;

    __device__ __forceinline__ void operator()(const elem_t* v, int row, int col) const
    {
        const size_t at = (size_t)row * N + col;
        if (stage == STORE) {
            store_run<W>(C + at, v, col, N);
            return;
        }
#if split_k > 1
        if (stage == PUBLISH) {
#if split_reduce == 0
#pragma unroll
            for (int e = 0; e < W; ++e)
                if (col + e < N) atomicAdd(accum + at + e, v[e]);
#else
            store_run<W>(partials + blockIdx.z * slice + at, v, col, N);
#endif
            return;
        }
        elem_t sum[W];
#if split_reduce == 0
        load_run_l2<W>(sum, accum + at, col, N);
        const elem_t zero[W] = {};
        store_run<W>(accum + at, zero, col, N);  // accum is zero again for the next launch
#else
        // slice order, this block's own slice from its registers: the same sums whichever block is last
#pragma unroll
        for (int e = 0; e < W; ++e) sum[e] = 0;
        for (int z = 0; z < split_k; ++z) {
            elem_t part[W];
            if (z == (int)blockIdx.z) {
#pragma unroll
                for (int e = 0; e < W; ++e) part[e] = v[e];
            } else {
                load_run_l2<W>(part, partials + z * slice + at, col, N);
            }
#pragma unroll
            for (int e = 0; e < W; ++e) sum[e] += part[e];
        }
#endif
        store_run<W>(C + at, sum, col, N);
#endif
    }
};

// The block's outputs to C. runs(sink) calls sink(v, row, col) for each run of W outputs of this thread. With
// split-K, each block publishes its slice's partial tile and counts in; the last block of the tile sums them
// into C.
template <int W, typename Runs>
__device__ __forceinline__ void write_tile(Runs runs, elem_t* __restrict__ C, elem_t* __restrict__ accum,
                                           elem_t* __restrict__ partials, int* __restrict__ counters, int M, int N,
                                           int t)
{
    RunSink<W> sink{C, accum, partials, (size_t)M * N, N, STORE};
#if split_k > 1
    sink.stage = PUBLISH;
    runs(sink);
    __threadfence();  // this block's partial is visible device-wide before it counts in
    __syncthreads();
    __shared__ int last;
    if (t == 0) {
        int* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
        last = atomicAdd(counter, 1) == split_k - 1;
        if (last) *counter = 0;  // every block of the tile has counted in: ready for the next launch
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    sink.stage = SUM;
#endif
    runs(sink);
}

#if k_groups > 1
// K split inside the block: after the K loop, groups 1.. leave their `count` accumulators in `buf` (thread-fastest:
// no bank conflicts), and group 0 adds them in group order. The caller has made `buf` free for everyone.
template <int count>
__device__ __forceinline__ void sum_groups(elem_t* acc, elem_t* buf, int group, int t)
{
    if (group > 0) {
#pragma unroll
        for (int r = 0; r < count; ++r) buf[((group - 1) * count + r) * NTHREADS + t] = acc[r];
    }
    __syncthreads();
    if (group == 0) {
#pragma unroll
        for (int h = 0; h < k_groups - 1; ++h)
#pragma unroll
            for (int r = 0; r < count; ++r) acc[r] += buf[(h * count + r) * NTHREADS + t];
    }
}
#endif

// This block's slice of K: whole KSTEP tiles k_begin .. k_end - 1 (all of them without split-K; a slice may be
// empty)
__device__ __forceinline__ int k_begin(int K)
{
#if split_k > 1
    return min((K + KSTEP - 1) / KSTEP, (int)blockIdx.z * (((K + KSTEP - 1) / KSTEP + split_k - 1) / split_k));
#else
    return 0;
#endif
}
__device__ __forceinline__ int k_end(int K, int begin)
{
#if split_k > 1
    return min((K + KSTEP - 1) / KSTEP, begin + ((K + KSTEP - 1) / KSTEP + split_k - 1) / split_k);
#else
    return (K + KSTEP - 1) / KSTEP;
#endif
}

#if variant == 4
// ---- register-tiled: tile_m x tile_n outputs per thread ------------------------------------------
#define LDA (BM + pad_a)             // row length of the transposed A tile As[BK][LDA]
#define A_SLOTS (BM * BK / vector)   // global loads (of `vector` elements) per A tile
#define B_SLOTS (BK * BN / vector)
#define A_LOADS ((A_SLOTS + NTHREADS - 1) / NTHREADS)
#define B_LOADS ((B_SLOTS + NTHREADS - 1) / NTHREADS)
#define STAGES (double_buffer ? 2 : 1)

// `vector` consecutive elements of row r (length len, ld elements apart) from column c on, zeros past
// the edges; one vector load when aligned and inside.
__device__ __forceinline__ void load_run(elem_t (&v)[vector], const elem_t* __restrict__ P, int r, int c,
                                         int rows, int len, bool aligned)
{
#if vector == 4
    if (aligned && r < rows && c + 3 < len) {
        const vec4_t x = *reinterpret_cast<const vec4_t*>(P + (size_t)r * len + c);
        v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < vector; ++e)
        v[e] = (r < rows && c + e < len) ? P[(size_t)r * len + c + e] : elem_t(0);
}

struct Staging {
    elem_t a[A_LOADS][vector];
    elem_t b[B_LOADS][vector];
};

// Global -> registers: slot s of the A tile is row s / (BK/vector), columns (s % (BK/vector)) * vector..
__device__ __forceinline__ void fetch(Staging& st, const elem_t* __restrict__ A, const elem_t* __restrict__ B,
                                      int m0, int n0, int k0, int M, int N, int K, int t)
{
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int s = t + l * NTHREADS;
        if (A_SLOTS % NTHREADS == 0 || s < A_SLOTS)
            load_run(st.a[l], A, m0 + s / (BK / vector), k0 + (s % (BK / vector)) * vector, M, K, (K & 3) == 0);
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int s = t + l * NTHREADS;
        if (B_SLOTS % NTHREADS == 0 || s < B_SLOTS)
            load_run(st.b[l], B, k0 + s / (BN / vector), n0 + (s % (BN / vector)) * vector, K, N, (N & 3) == 0);
    }
}

// Registers -> shared: A transposed (As[k][m]), B as it is (Bs[k][n]).
__device__ __forceinline__ void stash(const Staging& st, elem_t (*As)[LDA], elem_t (*Bs)[BN], int t)
{
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int s = t + l * NTHREADS;
        if (A_SLOTS % NTHREADS == 0 || s < A_SLOTS) {
            const int r = s / (BK / vector), c = (s % (BK / vector)) * vector;
#pragma unroll
            for (int e = 0; e < vector; ++e) As[c + e][r] = st.a[l][e];
        }
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int s = t + l * NTHREADS;
        if (B_SLOTS % NTHREADS == 0 || s < B_SLOTS) {
            const int r = s / (BN / vector), c = (s % (BN / vector)) * vector;
#if vector == 4
            *reinterpret_cast<vec4_t*>(&Bs[r][c]) = make_vec4(st.b[l]);
#else
            Bs[r][c] = st.b[l][0];
#endif
        }
    }
}

// One BK-deep slice: acc += As^T[rows of this thread] x Bs[cols of this thread], float4 shared loads.
__device__ __forceinline__ void multiply(elem_t (&acc)[tile_m][tile_n], const elem_t (*As)[LDA],
                                         const elem_t (*Bs)[BN], int tx, int ty)
{
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        elem_t a[tile_m], b[tile_n];
#pragma unroll
        for (int i = 0; i < tile_m / 4; ++i) {
            const vec4_t x = *reinterpret_cast<const vec4_t*>(&As[k][ty * 4 + i * block_size_y * 4]);
            a[4 * i] = x.x; a[4 * i + 1] = x.y; a[4 * i + 2] = x.z; a[4 * i + 3] = x.w;
        }
#pragma unroll
        for (int j = 0; j < tile_n / 4; ++j) {
            const vec4_t x = *reinterpret_cast<const vec4_t*>(&Bs[k][tx * 4 + j * block_size_x * 4]);
            b[4 * j] = x.x; b[4 * j + 1] = x.y; b[4 * j + 2] = x.z; b[4 * j + 3] = x.w;
        }
#pragma unroll
        for (int i = 0; i < tile_m; ++i)
#pragma unroll
            for (int j = 0; j < tile_n; ++j) acc[i][j] += a[i] * b[j];
    }
}

// Each thread's outputs as 4-wide runs of a row: f(i, j, row, col) for acc[i][4j..4j+3] at C[row][col..],
// rows past M skipped (columns past N are the run functions' to guard).
template <typename F>
__device__ __forceinline__ void for_each_run(int m0, int n0, int M, int N, int tx, int ty, F f)
{
#pragma unroll
    for (int i = 0; i < tile_m; ++i) {
        const int row = m0 + ty * 4 + (i / 4) * block_size_y * 4 + i % 4;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < tile_n / 4; ++j) f(i, j, row, n0 + tx * 4 + j * block_size_x * 4);
    }
}

#if k_groups > 1
// The k_groups' tiles (stage s: rows group * BK .. of As[s] and Bs[s] are the group's), then, once the K loop is
// done, groups 1.. leave their outputs here for group 0 to sum: one buffer for both.
#define TILE_ELEMS (STAGES * KSTEP * (LDA + BN))
#define SUM_ELEMS ((k_groups - 1) * BM * BN)
#endif

extern "C" __global__ void __launch_bounds__(NTHREADS * k_groups)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
#if k_groups > 1
    __shared__ __align__(16) elem_t smem[TILE_ELEMS > SUM_ELEMS ? TILE_ELEMS : SUM_ELEMS];
    elem_t (*As)[KSTEP][LDA] = reinterpret_cast<elem_t (*)[KSTEP][LDA]>(smem);
    elem_t (*Bs)[KSTEP][BN] = reinterpret_cast<elem_t (*)[KSTEP][BN]>(smem + STAGES * KSTEP * LDA);
    const int group = threadIdx.z;  // BK rows group * BK.. of each KSTEP tile
#else
    __shared__ __align__(16) elem_t As[STAGES][BK][LDA];
    __shared__ __align__(16) elem_t Bs[STAGES][BK][BN];
    const int group = 0;
#endif
    const int t = threadIdx.y * block_size_x + threadIdx.x;  // within the group
    // warp tiles: warp w covers warp_x x (32 / warp_x) threads of the block_size_x x block_size_y grid
    const int warp = t / 32, lane = t % 32;
    const int tx = (warp % (block_size_x / warp_x)) * warp_x + lane % warp_x;
    const int ty = (warp / (block_size_x / warp_x)) * (32 / warp_x) + lane / warp_x;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    elem_t acc[tile_m][tile_n];
#pragma unroll
    for (int i = 0; i < tile_m; ++i)
#pragma unroll
        for (int j = 0; j < tile_n; ++j) acc[i][j] = 0;

    Staging st;
    const int kt0 = k_begin(K), kt1 = k_end(K, kt0);
#if double_buffer
#if split_k > 1
    if (kt0 < kt1)  // a slice may be empty (fewer BK tiles than slices)
#endif
    {
        fetch(st, A, B, m0, n0, kt0 * KSTEP + group * BK, M, N, K, t);
        stash(st, As[0] + group * BK, Bs[0] + group * BK, t);
    }
    __syncthreads();
    for (int kt = kt0; kt < kt1; ++kt) {
        const int cur = (kt - kt0) & 1;
        // in flight during the FMAs
        if (kt + 1 < kt1) fetch(st, A, B, m0, n0, (kt + 1) * KSTEP + group * BK, M, N, K, t);
        multiply(acc, As[cur] + group * BK, Bs[cur] + group * BK, tx, ty);
        if (kt + 1 < kt1) stash(st, As[cur ^ 1] + group * BK, Bs[cur ^ 1] + group * BK, t);
        // one barrier per tile: the other stage was last read before the previous barrier
        __syncthreads();
    }
#if k_groups > 1
    sum_groups<tile_m * tile_n>(&acc[0][0], smem, group, t);  // the loop ended on a barrier: the tiles are free
#endif
#else
    for (int kt = kt0; kt < kt1; ++kt) {
        fetch(st, A, B, m0, n0, kt * KSTEP, M, N, K, t);
        stash(st, As[0], Bs[0], t);
        __syncthreads();
        multiply(acc, As[0], Bs[0], tx, ty);
        __syncthreads();
    }
#endif

    // group 0 holds the block's sums (the other groups take part in split-K's barriers only)
#if split_k == 1
    if (group == 0)
        for_each_run(m0, n0, M, N, tx, ty, [&](int i, int j, int row, int col) {
            store_run<4>(C + (size_t)row * N + col, &acc[i][4 * j], col, N);
        });
#else
    write_tile<4>([&](const RunSink<4>& f) {
        if (group == 0)
            for_each_run(m0, n0, M, N, tx, ty, [&](int i, int j, int row, int col) { f(&acc[i][4 * j], row, col); });
    }, C, accum, partials, counters, M, N, group * NTHREADS + t);
#endif
}
#else
// ---- 3xTF32 tensor cores: warp tiles of m16n8k8 mma.sync, a cp.async pipeline of `stages` tiles -------
#define WARPS_N (block_size_x / 4)
#define WTM (8 * tile_m)  // warp tile: WTM x WTN outputs, MT x NT mma tiles of 16 x 8
#define WTN (4 * tile_n)
#define MT (WTM / 16)
#define NT (WTN / 8)
#define A_CHUNKS (BM * BK / 4)  // 16-byte chunks (4 floats) of an A tile
#define B_CHUNKS (BK * BN / 4)
#define A_ROWS_PER_LINE (32 / BK)  // rows of the A tile in one 128-byte row of banks

// T is float: T_IS_float is 1 (T_IS_int is no macro, 0 in #if)
#define T_IS_float 1
#define PASTE(a, b) a##b
#define T_IS(t) PASTE(T_IS_, t)
#if !T_IS(T)
#error "variant 5 (3xTF32 tensor cores) is float32 only: there is no int32 build"
#else

// Shared tiles, offsets in floats, XOR-swizzled by 16-byte chunks (no padding: every float of the 48 KB of
// static shared memory holds data). A tile: BM rows of BK floats; chunk c of row r is stored at chunk
// c ^ ((r / A_ROWS_PER_LINE) % (BK / 4)), so 8 consecutive rows (an ldmatrix phase) hit 8 distinct groups of
// 4 banks, and so do the copies of 8 consecutive chunks.
__device__ __forceinline__ int a_offset(int r, int c) { return r * BK + ((c ^ ((r / A_ROWS_PER_LINE) % (BK / 4))) << 2); }
// B tile: BK rows of BN floats; chunk c of row k at c ^ 2 (k % 4): a B fragment's lanes read 4 rows (k % 4 =
// lane % 4) x 8 columns (two chunks), which land in 8 distinct groups of 4 banks.
__device__ __forceinline__ int b_offset(int k, int c) { return k * BN + ((c ^ ((k & 3) << 1)) << 2); }

__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// Floats c..c+3 of row r of P (rows x len, row-major) to dst, zeros past the edges (the bytes not read are
// zero-filled): one 16-byte copy where the row length keeps rows 16-byte aligned, else four 4-byte copies.
__device__ __forceinline__ void copy_run(float* dst, const float* __restrict__ P, int r, int c, int rows, int len,
                                         bool aligned)
{
    const int n = r < rows ? min(4, len - c) : 0;  // floats inside the matrix (<= 0: none)
    const float* src = P + (size_t)r * len + c;
    if (aligned) {
        cp_async16(dst, n > 0 ? src : P, n > 0 ? 4 * n : 0);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) cp_async4(dst + e, e < n ? src + e : P, e < n ? 4 : 0);
    }
}

// One stage: the A tile (rows m0.., columns k0..) and the B tile (rows k0.., columns n0..), in flight.
__device__ __forceinline__ void load_tile(float* as, float* bs, const float* __restrict__ A,
                                          const float* __restrict__ B, int m0, int n0, int k0, int M, int N, int K,
                                          int t)
{
#pragma unroll
    for (int l = 0; l < (A_CHUNKS + NTHREADS - 1) / NTHREADS; ++l) {
        const int s = t + l * NTHREADS;
        if (A_CHUNKS % NTHREADS == 0 || s < A_CHUNKS)
            copy_run(as + a_offset(s / (BK / 4), s % (BK / 4)), A, m0 + s / (BK / 4), k0 + s % (BK / 4) * 4, M, K,
                     (K & 3) == 0);
    }
#pragma unroll
    for (int l = 0; l < (B_CHUNKS + NTHREADS - 1) / NTHREADS; ++l) {
        const int s = t + l * NTHREADS;
        if (B_CHUNKS % NTHREADS == 0 || s < B_CHUNKS)
            copy_run(bs + b_offset(s / (BN / 4), s % (BN / 4)), B, k0 + s / (BN / 4), n0 + s % (BN / 4) * 4, K, N,
                     (N & 3) == 0);
    }
}

__device__ __forceinline__ unsigned to_tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// x = big + small to about 2^-22 x: big the nearest TF32 of x, small that of the remainder (exact in float32)
__device__ __forceinline__ void split(float x, unsigned& big, unsigned& small)
{
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

// c += a b for a 16 x 8 (rows of a) x 8 (k) tile: a row-major, b column-major fragments, float32 c
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8 x 4 float matrices (ldmatrix's 8 x 8 of 16 bits), row addresses from lanes 8j..8j+7 for matrix j
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"((unsigned)__cvta_generic_to_shared(p)));
}

// One stage's BK-deep product of this warp's tile; thread (g, q) = (lane / 4, lane % 4) of the fragments.
__device__ __forceinline__ void multiply(float (&acc)[MT][NT][4], const float* as, const float* bs, int wm, int wn,
                                         int lane)
{
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk) {
        unsigned a_big[MT][4], a_small[MT][4], b_big[NT][2], b_small[NT][2];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            // matrix j: rows + 8 (j & 1), k + 4 (j >> 1): thread (g, q) receives the A fragment a0..a3 =
            // (g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4)
            const int j = lane >> 3;
            unsigned x[4];
            ldmatrix_x4(x, as + a_offset(wm * WTM + i * 16 + (j & 1) * 8 + (lane & 7), kk * 2 + (j >> 1)));
#pragma unroll
            for (int h = 0; h < 4; ++h) split(__uint_as_float(x[h]), a_big[i][h], a_small[i][h]);
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            // b0 = (k q, column g), b1 = (k q + 4, column g); with k % 4 = q and WTN a multiple of 32, b_offset's
            // swizzled column is wn WTN + 8 (n ^ q) + g
            const float* p = bs + (kk * 8 + q) * BN + wn * WTN + 8 * (n ^ q) + g;
            split(p[0], b_big[n][0], b_small[n][0]);
            split(p[4 * BN], b_big[n][1], b_small[n][1]);
        }
#if rn_sum
        // the step's three products summed by the tensor core from zero, then added by a float32 add: the
        // running sum is rounded to nearest once per step (not toward zero three times)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                mma(s, a_small[i], b_big[n]);
                mma(s, a_big[i], b_small[n]);
                mma(s, a_big[i], b_big[n]);
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][n][e] += s[e];
            }
#else
        // the small products first (while the sum is smaller), each pass over all tiles so that consecutive
        // mma's never wait on each other
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int n = 0; n < NT; ++n) mma(acc[i][n], a_small[i], b_big[n]);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int n = 0; n < NT; ++n) mma(acc[i][n], a_big[i], b_small[n]);
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int n = 0; n < NT; ++n) mma(acc[i][n], a_big[i], b_big[n]);
#endif
    }
}

#if k_groups > 1
// Each group's pipeline (its stages group * stages.. of As and Bs), then, once the K loop is done, groups 1..
// leave their accumulators here for group 0 to add: one buffer for both.
#define TILE_FLOATS (k_groups * stages * (BM * BK + BK * BN))
#define SUM_FLOATS ((k_groups - 1) * BM * BN)
#endif

// 2 blocks of 128 threads: the register cap stays 255, but ptxas no longer aims at 3 blocks (168 registers),
// which made it spill some 128-thread configs
extern "C" __global__ void __launch_bounds__(NTHREADS * k_groups, NTHREADS * k_groups <= 128 ? 2 : 1)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
#if k_groups > 1
    __shared__ __align__(128) float smem[TILE_FLOATS > SUM_FLOATS ? TILE_FLOATS : SUM_FLOATS];
    const int group = threadIdx.z;  // BK tile `group` of each KSTEP, in the group's own stages
    float (*As)[BM * BK] = reinterpret_cast<float (*)[BM * BK]>(smem) + group * stages;
    float (*Bs)[BK * BN] = reinterpret_cast<float (*)[BK * BN]>(smem + k_groups * stages * BM * BK) + group * stages;
#else
    __shared__ __align__(128) float As[stages][BM * BK];
    __shared__ __align__(128) float Bs[stages][BK * BN];
    const int group = 0;
#endif
    const int t = threadIdx.y * block_size_x + threadIdx.x;  // within the group
    const int warp = t >> 5, lane = t & 31;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][n][e] = 0.0f;

    const int kt0 = k_begin(K), tiles = k_end(K, kt0) - kt0;
    // tile i is copy group i (empty groups past the last tile keep the count): stages - 1 tiles in flight
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < tiles) load_tile(As[s], Bs[s], A, B, m0, n0, (kt0 + s) * KSTEP + group * BK, M, N, K, t);
        cp_async_commit();
    }
    int read = 0, write = stages - 1;
    for (int i = 0; i < tiles; ++i) {
        cp_async_wait<stages - 2>();  // this thread's copies of tile i have landed ...
        __syncthreads();  // ... everyone's too, and everyone is done with tile i - 1, whose stage is refilled
        if (i + stages - 1 < tiles)
            load_tile(As[write], Bs[write], A, B, m0, n0, (kt0 + i + stages - 1) * KSTEP + group * BK, M, N, K, t);
        cp_async_commit();
        multiply(acc, As[read], Bs[read], wm, wn, lane);
        read = read == stages - 1 ? 0 : read + 1;
        write = write == stages - 1 ? 0 : write + 1;
    }
#if k_groups > 1
    cp_async_wait<0>();  // no copies left in flight ...
    __syncthreads();  // ... and every group done with its stages
    sum_groups<MT * NT * 4>(&acc[0][0][0], smem, group, t);
#endif

    // thread (g, q) holds (row g, columns 2q, 2q + 1) and (row g + 8, the same) of each mma tile; group 0 holds
    // the block's sums (the other groups take part in split-K's barriers only)
    write_tile<2>([&](const RunSink<2>& f) {
        if (group != 0) return;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * WTM + i * 16 + (lane >> 2) + 8 * h;
                if (row >= M) continue;
#pragma unroll
                for (int n = 0; n < NT; ++n) f(&acc[i][n][2 * h], row, n0 + wn * WTN + n * 8 + 2 * (lane & 3));
            }
    }, C, accum, partials, counters, M, N, group * NTHREADS + t);
}
#endif  // T is float
#endif
#endif
