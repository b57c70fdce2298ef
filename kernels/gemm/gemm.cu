// Dense matrix multiplication C = A . B (row-major A: M x K, B: K x N, C: M x N), one kernel whose
// #define parameters span the seeds' hand-tuned versions (002: naive, coalesced A, A and B in shared
// memory; 004: "merged threads") and what fast hand-written SGEMMs do (register-tiled, variant 4).
//
// Signature: gemm(const T* A, const T* B, T* C, int M, int N, int K, T* accum, T* partials, int* counters);
// any M, N, K >= 1 (tiles at the edges are guarded; vector loads are used only where the row length keeps
// them aligned). The last three are split-K's workspace (variant 4 with split_k > 1; the others ignore
// them): accum M x N and counters (one per output tile of 32 x 32 or more) all zero before the first
// launch, and left zero by every launch; partials split_k x M x N, any contents.
// Launch: 2-D block (block_size_x, block_size_y),
//         grid (ceil(N / (block_size_x * tile_n)), ceil(M / (block_size_y * tile_m)), split_k).
//
// Types: T is float or int (prepended as `#define T ...`, not -DT: CUDA 13 headers use T as a name).
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
//   block_size_x, block_size_y  thread block shape
//   tile_m, tile_n  outputs per thread in M and N (variant 3: tile_m only; variants 1, 2: 1)
//   tile_k   BK of variant 4 (variants 1-3: = block_size_x, the tile width)
//   warp_x   variant 4: threads of a warp along N (the warp covers warp_x x 32/warp_x threads)
//   double_buffer  variant 4: 1 = two shared-memory stages, the next tile is fetched into registers
//                  while the current one is multiplied (one barrier per tile); 0 = load, sync, compute, sync
//   pad_a    variant 4: floats of padding per row of the transposed A tile (against bank conflicts)
//   vector   variant 4: 4 = float4 (int4) global loads of A and B where aligned, 1 = scalar loads
//   unroll   variants 1-3: 0 = the compiler's default for the inner loop (as the seeds compiled),
//            4 = `#pragma unroll 4`
//   split_k  variant 4: blocks per output tile, each over its own slice of K (whole BK tiles, blockIdx.z);
//            1 = no split. The blocks of a tile count themselves in (counters[tile]); the last one to
//            arrive writes the tile of C and sets the counter back to zero, so no launch needs C or the
//            workspace cleared first, and no block ever waits for another.
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

#if variant < 1 || variant > 4
#error "variant must be 1..4"
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
#if split_k < 1 || (split_k > 1 && variant != 4)
#error "split_k > 1 needs variant 4"
#endif
#if split_reduce != 0 && split_reduce != 1
#error "split_reduce must be 0 or 1"
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
// ---- register-tiled: block tile BM x BN x BK, tile_m x tile_n outputs per thread ----------------
#define BM (block_size_y * tile_m)
#define BN (block_size_x * tile_n)
#define BK tile_k
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

// Store v[0..3] at p (= row start + col): one vector store where aligned and inside, else up to column N.
__device__ __forceinline__ void store_run(elem_t* p, const elem_t* v, int col, int N)
{
    if ((N & 3) == 0 && col + 3 < N) {
        vec4_t x;
        x.x = v[0]; x.y = v[1]; x.z = v[2]; x.w = v[3];
        *reinterpret_cast<vec4_t*>(p) = x;
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (col + e < N) p[e] = v[e];
    }
}

#if split_k > 1
// Load v[0..3] from p through L2 (other blocks' writes and atomics; L1 is not coherent), zeros past N.
__device__ __forceinline__ void load_run_l2(elem_t* v, const elem_t* p, int col, int N)
{
    if ((N & 3) == 0 && col + 3 < N) {
        const vec4_t x = __ldcg(reinterpret_cast<const vec4_t*>(p));
        v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = col + e < N ? __ldcg(p + e) : elem_t(0);
    }
}
#endif

extern "C" __global__ void __launch_bounds__(NTHREADS)
gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N, int K,
     elem_t* __restrict__ accum, elem_t* __restrict__ partials, int* __restrict__ counters)
{
    __shared__ __align__(16) elem_t As[STAGES][BK][LDA];
    __shared__ __align__(16) elem_t Bs[STAGES][BK][BN];
    const int t = threadIdx.y * block_size_x + threadIdx.x;
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
    // this block's slice of K: whole BK tiles kt0 .. kt1-1 (all of them without split-K)
    const int ktiles = (K + BK - 1) / BK;
#if split_k > 1
    const int per_slice = (ktiles + split_k - 1) / split_k;
    const int kt0 = min(ktiles, (int)blockIdx.z * per_slice), kt1 = min(ktiles, kt0 + per_slice);
#else
    const int kt0 = 0, kt1 = ktiles;
#endif
#if double_buffer
#if split_k > 1
    if (kt0 < kt1)  // a slice may be empty (fewer BK tiles than slices)
#endif
    {
        fetch(st, A, B, m0, n0, kt0 * BK, M, N, K, t);
        stash(st, As[0], Bs[0], t);
    }
    __syncthreads();
    for (int kt = kt0; kt < kt1; ++kt) {
        const int cur = (kt - kt0) & 1;
        if (kt + 1 < kt1) fetch(st, A, B, m0, n0, (kt + 1) * BK, M, N, K, t);  // in flight during the FMAs
        multiply(acc, As[cur], Bs[cur], tx, ty);
        if (kt + 1 < kt1) stash(st, As[cur ^ 1], Bs[cur ^ 1], t);
        // one barrier per tile: the other stage was last read before the previous barrier
        __syncthreads();
    }
#else
    for (int kt = kt0; kt < kt1; ++kt) {
        fetch(st, A, B, m0, n0, kt * BK, M, N, K, t);
        stash(st, As[0], Bs[0], t);
        __syncthreads();
        multiply(acc, As[0], Bs[0], tx, ty);
        __syncthreads();
    }
#endif

#if split_k == 1
    for_each_run(m0, n0, M, N, tx, ty, [&](int i, int j, int row, int col) {
        store_run(C + (size_t)row * N + col, &acc[i][4 * j], col, N);
    });
#else
    // publish this slice's partial tile, then count in; the last block of the tile finishes it
#if split_reduce == 1
    const size_t MN = (size_t)M * N;
#endif
    for_each_run(m0, n0, M, N, tx, ty, [&](int i, int j, int row, int col) {
#if split_reduce == 0
        elem_t* p = accum + (size_t)row * N + col;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (col + e < N) atomicAdd(p + e, acc[i][4 * j + e]);
#else
        store_run(partials + blockIdx.z * MN + (size_t)row * N + col, &acc[i][4 * j], col, N);
#endif
    });
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
    for_each_run(m0, n0, M, N, tx, ty, [&](int i, int j, int row, int col) {
        const size_t at = (size_t)row * N + col;
        elem_t sum[4];
#if split_reduce == 0
        load_run_l2(sum, accum + at, col, N);
        const elem_t zero[4] = {0, 0, 0, 0};
        store_run(accum + at, zero, col, N);  // accum is zero again for the next launch
#else
        // slice order, this block's own slice from its registers: the same sums whichever block is last
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[e] = 0;
        for (int z = 0; z < split_k; ++z) {
            elem_t part[4];
            if (z == (int)blockIdx.z) {
#pragma unroll
                for (int e = 0; e < 4; ++e) part[e] = acc[i][4 * j + e];
            } else {
                load_run_l2(part, partials + z * MN + at, col, N);
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) sum[e] += part[e];
        }
#endif
        store_run(C + at, sum, col, N);
    });
#endif
}
#endif
