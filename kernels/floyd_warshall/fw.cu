// Blocked Floyd-Warshall all-pairs shortest paths (seed 000), as one host pipeline: the extern "C" function
// floyd_warshall() builds the distance matrix on the GPU(s) from an edge list, runs every round's three
// phases, copies the distances back and returns the time of the rounds in ms (CUDA events; allocation,
// set-up and copies excluded), or a negative value after printing a CUDA error. Kernel Tuner's C backend
// calls it with each configuration's parameters as #defines in front of this file.
//
// Distances are int32 with INF = 2^30 - 1 for "no path". Every entry stays <= INF (it only ever decreases
// from its initial value), so a + b <= 2^31 - 2 never overflows and min(INF, INF + x) stays INF.
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <cstdio>

// ---- tunable parameters (Kernel Tuner defines them; defaults = the seed's configuration) ---------------
#ifndef BLOCK
#define BLOCK 64          // blocking factor: a round handles BLOCK pivots; tiles are BLOCK x BLOCK
#endif
#ifndef block_size_x
#define block_size_x 32   // threads per block along columns
#endif
#ifndef block_size_y
#define block_size_y 32   // threads per block along rows
#endif
#ifndef VEC
#define VEC 0             // 0: a thread's elements strided by the block shape (the seed's mapping);
#endif                    // 1: contiguous runs of 4, read from shared memory as int4 (k-loop in steps of 4)
#ifndef DPX
#define DPX 0             // 1: min(a + b, c) as Hopper's DPX __viaddmin_s32
#endif
#ifndef PAD
#define PAD 0             // ints of padding after each shared tile row (bank conflicts)
#endif
#ifndef K_UNROLL
#define K_UNROLL 64       // #pragma unroll of the phase-3 k-loop
#endif
#ifndef LOOKAHEAD
#define LOOKAHEAD 0       // 1: phases 1-2 of round r+1 run on a second stream beside phase 3 of round r;
#endif                    // 2: besides, the bulk of phase 3 runs on its own stream, back to back (below);
                          // 3: as 2, with the bulk in two halves of rows on two streams (below)
#ifndef SPLIT
#define SPLIT 100         // several GPUs: GPU 0's share of phase-3 row blocks, in % of an even share
#endif
#ifndef KCHUNK
#define KCHUNK 0          // phase 3: 0 holds both whole pivot tiles in shared memory; K > 0 streams them in
#endif                    // chunks of K pivots, double-buffered with cp.async (less shared memory per block)
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0      // phase 3's __launch_bounds__ minimum of resident blocks per SM: ptxas keeps registers
#endif                    // within 64K / (MIN_BLOCKS * threads); 0: the default below
#ifndef PRIORITY
#define PRIORITY 0        // 1 (with LOOKAHEAD): the stream of the next round's critical path (its pivot row and
#endif                    // column tiles, phases 1-2) gets the GPU's highest priority over the bulk of phase 3

#define NT (block_size_x * block_size_y)
#define EX (BLOCK / block_size_x)  // elements per thread along a row
#define EY (BLOCK / block_size_y)  // elements per thread along a column
#define LD (BLOCK + PAD)           // row stride of a shared tile
#define LDA (KCHUNK + PAD)         // row stride of a shared chunk of the pivot column tile (KCHUNK > 0)

#if BLOCK % block_size_x != 0 || BLOCK % block_size_y != 0
#error "BLOCK must be a multiple of the block shape"
#endif
#if BLOCK % 16 != 0
#error "BLOCK must be a multiple of 16 (int4 tile copies, k-loop steps of 4)"
#endif
#if VEC && (PAD % 4 != 0 || (EX > 2 && EX % 4 != 0))
#error "VEC needs PAD % 4 == 0 and 1, 2 or a multiple of 4 elements per row"
#endif
#if KCHUNK && (KCHUNK % 4 != 0 || KCHUNK >= BLOCK || BLOCK % KCHUNK != 0)
#error "KCHUNK must be a multiple of 4 that divides BLOCK and is smaller"
#endif

#define PRAGMA_(x) _Pragma(#x)
#define PRAGMA(x) PRAGMA_(x)

static constexpr int INF = 1073741823;

__device__ __forceinline__ int relax(int a, int b, int c) {  // min(a + b, c)
#if DPX && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return __viaddmin_s32(a, b, c);
#else
    return min(a + b, c);
#endif
}

// The tile row of a thread's i-th element and tile column of its j-th.
__device__ __forceinline__ int row_of(int i) {
#if VEC
    return threadIdx.y * EY + i;
#else
    return threadIdx.y + i * block_size_y;
#endif
}
__device__ __forceinline__ int col_of(int j) {
#if VEC && EX >= 4
    return (j / 4) * (block_size_x * 4) + threadIdx.x * 4 + (j % 4);  // int4 runs, adjacent across threads
#elif VEC
    return threadIdx.x * EX + j;
#else
    return threadIdx.x + j * block_size_x;
#endif
}

// The idx-th block index of [lo, ...) with s1 and s2 left out (s1 < s2; -1 = none).
__device__ __forceinline__ int pick(int idx, int lo, int s1, int s2) {
    int x = lo + idx;
    if (s1 >= lo && x >= s1) ++x;
    if (s2 >= lo && x >= s2) ++x;
    return x;
}

// Copy a BLOCK x BLOCK tile between global memory (row stride np) and shared memory (row stride LD).
template <bool TO_SHARED>
__device__ __forceinline__ void copy_tile(int *s, int *g, int np) {
    const int tid = threadIdx.y * block_size_x + threadIdx.x;
#if PAD % 4 == 0
    for (int u = tid; u < BLOCK * BLOCK / 4; u += NT) {
        const int r = u / (BLOCK / 4), c = (u % (BLOCK / 4)) * 4;
        int4 *sp = reinterpret_cast<int4 *>(s + r * LD + c);
        int4 *gp = reinterpret_cast<int4 *>(g + (size_t)r * np + c);
        if (TO_SHARED) *sp = *gp; else *gp = *sp;
    }
#else
    for (int u = tid; u < BLOCK * BLOCK; u += NT) {
        const int r = u / BLOCK, c = u % BLOCK;
        if (TO_SHARED) s[r * LD + c] = g[(size_t)r * np + c]; else g[(size_t)r * np + c] = s[r * LD + c];
    }
#endif
}

// Phases 1 and 2: a tile x updated in place, x[i][j] = min(x[i][j], a[i][k] + b[k][j]) for k in order,
// where a or b is x itself. Entries of row k and column k do not change at step k (the diagonal of the
// pivot tile is >= 0), so one barrier per step suffices. The values live in registers; step k + 1 reads
// only row and column k + 1 of x, so only those go back to shared memory during the loop.
__device__ __forceinline__ void inplace_rounds(int *x, const int *a, const int *b) {
    int v[EY][EX];
#pragma unroll
    for (int i = 0; i < EY; ++i)
#pragma unroll
        for (int j = 0; j < EX; ++j) v[i][j] = x[row_of(i) * LD + col_of(j)];
    for (int k = 0; k < BLOCK; ++k) {
#pragma unroll
        for (int i = 0; i < EY; ++i) {
            const int aik = a[row_of(i) * LD + k];
#pragma unroll
            for (int j = 0; j < EX; ++j) v[i][j] = relax(aik, b[k * LD + col_of(j)], v[i][j]);
        }
        // publish row k + 1 and column k + 1 (EY + EX tests, not one per element)
#pragma unroll
        for (int i = 0; i < EY; ++i)
            if (row_of(i) == k + 1)
#pragma unroll
                for (int j = 0; j < EX; ++j) x[row_of(i) * LD + col_of(j)] = v[i][j];
#pragma unroll
        for (int j = 0; j < EX; ++j)
            if (col_of(j) == k + 1)
#pragma unroll
                for (int i = 0; i < EY; ++i) x[row_of(i) * LD + col_of(j)] = v[i][j];
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < EY; ++i)
#pragma unroll
        for (int j = 0; j < EX; ++j) x[row_of(i) * LD + col_of(j)] = v[i][j];
    __syncthreads();
}

__global__ void __launch_bounds__(NT) fw_phase1(int *D, int np, int r) {
    extern __shared__ int smem[];
    int *g = D + (size_t)r * BLOCK * np + r * BLOCK;
    copy_tile<true>(smem, g, np);
    __syncthreads();
    inplace_rounds(smem, smem, smem);
    copy_tile<false>(smem, g, np);
}

// Phase 2: the pivot row's tiles (r, j), j != r, then the pivot column's tiles (i, r) for i in [lo, hi), i != r.
__global__ void __launch_bounds__(NT) fw_phase2(int *D, int np, int r, int R, int lo) {
    extern __shared__ int smem[];
    int *pivot = smem, *x = smem + BLOCK * LD;
    const bool in_row = blockIdx.x < R - 1;
    const int bi = in_row ? r : pick(blockIdx.x - (R - 1), lo, r, -1);
    const int bj = in_row ? pick(blockIdx.x, 0, r, -1) : r;
    int *g = D + (size_t)bi * BLOCK * np + bj * BLOCK;
    copy_tile<true>(pivot, D + (size_t)r * BLOCK * np + r * BLOCK, np);
    copy_tile<true>(x, g, np);
    __syncthreads();
    if (in_row) inplace_rounds(x, pivot, x); else inplace_rounds(x, x, pivot);
    copy_tile<false>(x, g, np);
}

// v[i][j] = min(v[i][j], a[i][k] + b[k][j]) for k in [0, KN), with a (row stride lda) and b (row stride ldb)
// in shared memory: each thread's EY x EX outputs stay in registers, and each a or b value read is used
// EX or EY times. VEC reads a as int4 (4 pivots at a time) and b as int4 runs.
template <int KN, int lda, int ldb>
__device__ __forceinline__ void relax_tile(int (&v)[EY][EX], const int *sa, const int *sb) {
#if VEC
PRAGMA(unroll K_UNROLL)
    for (int k = 0; k < KN; k += 4) {
        int4 a[EY];
#pragma unroll
        for (int i = 0; i < EY; ++i) a[i] = *reinterpret_cast<const int4 *>(sa + row_of(i) * lda + k);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            int b[EX];
#pragma unroll
            for (int j = 0; j < EX; j += (EX >= 4 ? 4 : EX)) {
                const int *p = sb + (k + kk) * ldb + col_of(j);
                if constexpr (EX >= 4) {
                    const int4 q = *reinterpret_cast<const int4 *>(p);
                    b[j] = q.x; b[j + 1] = q.y; b[j + 2] = q.z; b[j + 3] = q.w;
                } else if constexpr (EX == 2) {
                    const int2 q = *reinterpret_cast<const int2 *>(p);
                    b[0] = q.x; b[1] = q.y;
                } else {
                    b[0] = *p;
                }
            }
#pragma unroll
            for (int i = 0; i < EY; ++i) {
                const int aik = kk == 0 ? a[i].x : kk == 1 ? a[i].y : kk == 2 ? a[i].z : a[i].w;
#pragma unroll
                for (int j = 0; j < EX; ++j) v[i][j] = relax(aik, b[j], v[i][j]);
            }
        }
    }
#else
PRAGMA(unroll K_UNROLL)
    for (int k = 0; k < KN; ++k) {
        int a[EY], b[EX];
#pragma unroll
        for (int i = 0; i < EY; ++i) a[i] = sa[row_of(i) * lda + k];
#pragma unroll
        for (int j = 0; j < EX; ++j) b[j] = sb[k * ldb + col_of(j)];
#pragma unroll
        for (int i = 0; i < EY; ++i)
#pragma unroll
            for (int j = 0; j < EX; ++j) v[i][j] = relax(a[i], b[j], v[i][j]);
    }
#endif
}

// A thread's outputs between global memory (tile at g, row stride np) and registers; VEC runs of 4 (or 2)
// adjacent elements move as one int4 (int2): np and the tile columns are multiples of 16, so they align.
template <bool LOAD>
__device__ __forceinline__ void move_outputs(int (&v)[EY][EX], int *g, int np) {
    constexpr int W = (VEC && EX >= 4) ? 4 : (VEC && EX == 2) ? 2 : 1;
#pragma unroll
    for (int i = 0; i < EY; ++i)
#pragma unroll
        for (int j = 0; j < EX; j += W) {
            int *p = g + (size_t)row_of(i) * np + col_of(j);
            if constexpr (W == 4) {
                if (LOAD) { const int4 q = *reinterpret_cast<const int4 *>(p); v[i][j] = q.x; v[i][j + 1] = q.y; v[i][j + 2] = q.z; v[i][j + 3] = q.w; }
                else *reinterpret_cast<int4 *>(p) = make_int4(v[i][j], v[i][j + 1], v[i][j + 2], v[i][j + 3]);
            } else if constexpr (W == 2) {
                if (LOAD) { const int2 q = *reinterpret_cast<const int2 *>(p); v[i][j] = q.x; v[i][j + 1] = q.y; }
                else *reinterpret_cast<int2 *>(p) = make_int2(v[i][j], v[i][j + 1]);
            } else {
                if (LOAD) v[i][j] = *p; else *p = v[i][j];
            }
        }
}

#if KCHUNK
#define CHUNK_INTS (BLOCK * LDA + KCHUNK * LD)  // one chunk: BLOCK x KCHUNK of the column tile, KCHUNK x BLOCK of the row tile

// Start copying chunk c (pivots c*KCHUNK ...) of the pivot column tile ga and pivot row tile gb into buf,
// asynchronously (cp.async; 16-byte pieces where the padding keeps shared rows 16-byte aligned).
__device__ __forceinline__ void fetch_chunk(int *buf, const int *ga, const int *gb, int np, int c) {
    const int tid = threadIdx.y * block_size_x + threadIdx.x;
    constexpr int W = PAD % 4 == 0 ? 4 : 1;
    int *sa = buf, *sb = buf + BLOCK * LDA;
    for (int u = tid; u < BLOCK * KCHUNK / W; u += NT) {
        const int r = u / (KCHUNK / W), k = (u % (KCHUNK / W)) * W;
        __pipeline_memcpy_async(sa + r * LDA + k, ga + (size_t)r * np + c * KCHUNK + k, 4 * W);
    }
    for (int u = tid; u < KCHUNK * BLOCK / W; u += NT) {
        const int k = u / (BLOCK / W), col = (u % (BLOCK / W)) * W;
        __pipeline_memcpy_async(sb + k * LD + col, gb + (size_t)(c * KCHUNK + k) * np + col, 4 * W);
    }
    __pipeline_commit();
}
#endif

// Phase 3: tiles (bi, bj) off the pivot row and column, from the pivot column tile (bi, r) and pivot row
// tile (r, bj) in shared memory; the tile's own values stay in registers. Rows: the idx-th of
// [rlo, ...) without rs1, rs2; columns likewise.
#if MIN_BLOCKS
#define P3_MIN_BLOCKS MIN_BLOCKS
#elif KCHUNK  // small shared chunks let several blocks share an SM: ask ptxas for <= 128 registers so they fit
#define P3_MIN_BLOCKS (NT >= 512 ? 1 : 512 / NT)
#else
#define P3_MIN_BLOCKS 1
#endif
__global__ void __launch_bounds__(NT, P3_MIN_BLOCKS) fw_phase3(int *D, int np, int r, int rlo, int rs1, int rs2, int clo,
                                                              int cs1, int cs2) {
    extern __shared__ int smem[];
    const int bi = pick(blockIdx.y, rlo, rs1, rs2), bj = pick(blockIdx.x, clo, cs1, cs2);
    int *ga = D + (size_t)bi * BLOCK * np + r * BLOCK, *gb = D + (size_t)r * BLOCK * np + bj * BLOCK;
    int *g = D + (size_t)bi * BLOCK * np + bj * BLOCK;
    int v[EY][EX];
#if KCHUNK
    // chunk c + 1 streams in while chunk c is used; the barrier after each chunk frees its buffer
    fetch_chunk(smem, ga, gb, np, 0);
    move_outputs<true>(v, g, np);
    for (int c = 0; c < BLOCK / KCHUNK; ++c) {
        int *buf = smem + (c & 1) * CHUNK_INTS;
        if (c + 1 < BLOCK / KCHUNK) {
            fetch_chunk(smem + ((c + 1) & 1) * CHUNK_INTS, ga, gb, np, c + 1);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();
        relax_tile<KCHUNK, LDA, LD>(v, buf, buf + BLOCK * LDA);
        __syncthreads();
    }
#else
    int *sa = smem, *sb = smem + BLOCK * LD;
    copy_tile<true>(sa, ga, np);
    copy_tile<true>(sb, gb, np);
    move_outputs<true>(v, g, np);
    __syncthreads();
    relax_tile<BLOCK, LD, LD>(v, sa, sb);
#endif
    move_outputs<false>(v, g, np);
}

// ---- set-up kernels ----------------------------------------------------------------------------------
__global__ void fw_init(int *D, int np) {
    const size_t total = (size_t)np * np;
    for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < total; u += (size_t)gridDim.x * blockDim.x)
        D[u] = (u / np == u % np) ? 0 : INF;
}

__global__ void fw_edges(int *D, int np, const int *edges, int n, int m) {  // keeps the lightest parallel edge
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < m; e += gridDim.x * blockDim.x) {
        const int s = edges[3 * e], d = edges[3 * e + 1], w = edges[3 * e + 2];
        if (s >= 0 && s < n && d >= 0 && d < n && w >= 0 && w < INF) atomicMin(D + (size_t)s * np + d, w);
    }
}

// ---- host pipeline -------------------------------------------------------------------------------------
#define CHECK(call)                                                                                  \
    do {                                                                                             \
        cudaError_t err_ = (call);                                                                   \
        if (err_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "floyd_warshall: %s (%s, line %d)\n", cudaGetErrorString(err_), #call, __LINE__); \
            return -1.0f;                                                                            \
        }                                                                                            \
    } while (0)

namespace {

struct Gpu {  // one device's share of the work and its resources, released on every return path
    int dev = 0, lo = 0, hi = 0;  // phase-3 row blocks [lo, hi)
    int *D = nullptr, *edges = nullptr;
    cudaStream_t s0 = nullptr, s1 = nullptr, s2 = nullptr;
    cudaEvent_t cross = nullptr, cross2 = nullptr, ready = nullptr, copied = nullptr, done = nullptr;
    ~Gpu() {
        if (!D && !edges && !s0) return;  // a slot never set up
        if (cudaSetDevice(dev) != cudaSuccess) return;
        cudaFree(D); cudaFree(edges);
        for (cudaStream_t s : {s0, s1, s2}) if (s) cudaStreamDestroy(s);
        for (cudaEvent_t e : {cross, cross2, ready, copied, done}) if (e) cudaEventDestroy(e);
    }
};

constexpr int MAX_GPUS = 16;
constexpr size_t SMEM1 = sizeof(int) * BLOCK * LD, SMEM2 = 2 * SMEM1;
#if KCHUNK
constexpr size_t SMEM3 = sizeof(int) * 2 * CHUNK_INTS;  // two chunk buffers
#else
constexpr size_t SMEM3 = SMEM2;
#endif

int count_in(int lo, int hi, int s1, int s2) {  // |[lo, hi) \ {s1, s2}|
    return (hi - lo) - (s1 >= lo && s1 < hi) - (s2 >= lo && s2 < hi && s2 != s1);
}

}  // namespace

extern "C" float floyd_warshall(const int *edges, int *dist, int n, int m, int gpus) {
    int have = 0;
    CHECK(cudaGetDeviceCount(&have));
    if (n < 1 || m < 0 || gpus < 1 || gpus > have || gpus > MAX_GPUS) {
        fprintf(stderr, "floyd_warshall: n = %d, m = %d, %d GPUs asked, %d present\n", n, m, gpus, have);
        return -1.0f;
    }
    const int R = (n + BLOCK - 1) / BLOCK, np = R * BLOCK;
    const dim3 threads(block_size_x, block_size_y);
    Gpu gpu[MAX_GPUS];  // destructors free whatever was allocated, on every return path

    // rows of blocks per GPU: GPU 0 weighs SPLIT / 100, the others 1
    const double total = SPLIT / 100.0 + (gpus - 1);
    for (int g = 0, done_rows = 0; g < gpus; ++g) {
        const double upto = (SPLIT / 100.0 + g) / total * R;
        gpu[g].dev = g;
        gpu[g].lo = done_rows;
        gpu[g].hi = g == gpus - 1 ? R : (int)(upto + 0.5);
        if (gpu[g].hi < done_rows) gpu[g].hi = done_rows;
        done_rows = gpu[g].hi;
    }
    auto owner = [&](int k) { int g = 0; while (k >= gpu[g].hi) ++g; return g; };

    for (int g = 0; g < gpus; ++g) {
        Gpu &G = gpu[g];  // set-up: not timed
        CHECK(cudaSetDevice(G.dev));
        for (int p = 0; p < gpus; ++p) {
            int can = 0;
            if (p != G.dev && cudaDeviceCanAccessPeer(&can, G.dev, p) == cudaSuccess && can) {
                const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
                if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError(); else CHECK(e);
            }
        }
        CHECK(cudaFuncSetAttribute(fw_phase1, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM1));
        CHECK(cudaFuncSetAttribute(fw_phase2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM2));
        CHECK(cudaFuncSetAttribute(fw_phase3, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM3));
        // The block scheduler otherwise serves the bulk of phase 3 (queued first, ~R^2 blocks) before the
        // critical path's few blocks, so those would run only in its last wave and the next round would wait.
        int least = 0, greatest = 0;
        CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        const int critical = LOOKAHEAD == 1 ? 1 : 0;  // the stream that runs phases 1-2 of the next round
        CHECK(cudaStreamCreateWithPriority(&G.s0, cudaStreamNonBlocking, PRIORITY && critical == 0 ? greatest : least));
        CHECK(cudaStreamCreateWithPriority(&G.s1, cudaStreamNonBlocking, PRIORITY && critical == 1 ? greatest : least));
        CHECK(cudaStreamCreateWithPriority(&G.s2, cudaStreamNonBlocking, least));
        for (cudaEvent_t *e : {&G.cross, &G.cross2, &G.ready, &G.copied, &G.done})
            CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
        CHECK(cudaMalloc(&G.D, sizeof(int) * (size_t)np * np));
        CHECK(cudaMalloc(&G.edges, sizeof(int) * 3 * (size_t)(m > 0 ? m : 1)));
        if (m > 0) CHECK(cudaMemcpy(G.edges, edges, sizeof(int) * 3 * (size_t)m, cudaMemcpyHostToDevice));
        fw_init<<<1024, 256, 0, G.s0>>>(G.D, np);
        if (m > 0) fw_edges<<<(m + 255) / 256 < 4096 ? (m + 255) / 256 : 4096, 256, 0, G.s0>>>(G.D, np, G.edges, n, m);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(G.s0));
    }

    // Pivot k ready on every GPU: its owner sends row block k to the others (it alone updated it), then
    // each GPU runs phase 1 and phase 2 (the whole pivot row, the pivot column in its own rows) on stream st.
    auto prepare = [&](int k, bool side) -> cudaError_t {
        const int o = owner(k);
        const size_t off = (size_t)k * BLOCK * np, bytes = sizeof(int) * (size_t)BLOCK * np;
        if (gpus > 1) {
            cudaStream_t st = side ? gpu[o].s1 : gpu[o].s0;
            cudaSetDevice(gpu[o].dev);
            for (int g = 0; g < gpus; ++g)
                if (g != o) cudaMemcpyPeerAsync(gpu[g].D + off, g, gpu[o].D + off, o, bytes, st);
            cudaEventRecord(gpu[o].copied, st);
        }
        for (int g = 0; g < gpus; ++g) {
            Gpu &G = gpu[g];
            cudaStream_t st = side ? G.s1 : G.s0;
            cudaSetDevice(G.dev);
            if (gpus > 1 && G.dev != o) cudaStreamWaitEvent(st, gpu[o].copied, 0);
            fw_phase1<<<1, threads, SMEM1, st>>>(G.D, np, k);
            const int blocks = (R - 1) + count_in(G.lo, G.hi, k, -1);
            if (blocks > 0) fw_phase2<<<blocks, threads, SMEM2, st>>>(G.D, np, k, R, G.lo);
        }
        return cudaGetLastError();
    };
    // Phase 3 of round r on rows [lo, hi) \ {rs1, rs2} x columns [clo, chi) \ {cs1, cs2}.
    auto phase3 = [&](Gpu &G, cudaStream_t st, int r, int lo, int hi, int rs1, int rs2, int clo, int chi, int cs1,
                      int cs2) {
        const int rows = count_in(lo, hi, rs1, rs2), cols = count_in(clo, chi, cs1, cs2);
        if (rows > 0 && cols > 0)
            fw_phase3<<<dim3(cols, rows), threads, SMEM3, st>>>(G.D, np, r, lo, rs1, rs2, clo, cs1, cs2);
    };

    cudaEvent_t start, stop;
    CHECK(cudaSetDevice(0));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start, gpu[0].s0));
    for (int g = 0; g < gpus; ++g) {
        Gpu &G = gpu[g];
        CHECK(cudaSetDevice(G.dev));
        CHECK(cudaStreamWaitEvent(G.s0, start, 0));
    }
    CHECK(prepare(0, false));
    for (int g = 0; g < gpus && LOOKAHEAD >= 2; ++g) {
        CHECK(cudaSetDevice(gpu[g].dev));
        CHECK(cudaEventRecord(gpu[g].ready, gpu[g].s0));  // phases 1-2 of round 0, for the bulk of its phase 3
    }
    for (int r = 0; r < R; ++r) {
        const int nx = r + 1;
        if (LOOKAHEAD >= 2) {
            // Two streams per GPU (LOOKAHEAD 3: three, below). s1 runs the bulk of each round's phase 3 (every
            // tile off rows and columns r and r + 1) back to back; s0 runs the tiles of row and column r + 1,
            // then phases 1-2 of round r + 1, beside it. The bulk of round r needs phases 1-2 of round r
            // (event `ready`); row and column r + 1 of round r need the bulk of round r - 1 (event `cross`).
            // The two touch disjoint tiles, and both only read the pivot row and column r. Each wait is
            // queued before the event it names is recorded again.
            for (int g = 0; g < gpus; ++g) {
                Gpu &G = gpu[g];
                cudaSetDevice(G.dev);
                cudaStreamWaitEvent(G.s0, G.cross, 0);  // the bulk of round r - 1 (never recorded at r = 0: no wait)
                if (LOOKAHEAD == 2) {
                    cudaStreamWaitEvent(G.s1, G.ready, 0);
                    phase3(G, G.s1, r, G.lo, G.hi, r, nx, 0, R, r, nx);
                    cudaEventRecord(G.cross, G.s1);
                } else {
                    // The bulk in two halves of rows, s1 (event cross) and s2 (cross2), so that one half's
                    // round r + 1 fills the last wave of the other's round r. Round r's bulk writes row r - 1,
                    // which every block of round r - 1 read as its pivot row, so the half holding row r - 1
                    // (h) first waits for the other (f) to finish round r - 1, and f is queued first.
                    cudaStreamWaitEvent(G.s0, G.cross2, 0);
                    const int mid = (G.lo + G.hi) / 2;
                    const bool first_half_holds = r - 1 < mid;
                    cudaStream_t sf = first_half_holds ? G.s2 : G.s1, sh = first_half_holds ? G.s1 : G.s2;
                    cudaEvent_t ef = first_half_holds ? G.cross2 : G.cross, eh = first_half_holds ? G.cross : G.cross2;
                    cudaStreamWaitEvent(sh, ef, 0);  // f's round r - 1, queued before f records ef again
                    cudaStreamWaitEvent(sf, G.ready, 0);
                    cudaStreamWaitEvent(sh, G.ready, 0);
                    phase3(G, sf, r, first_half_holds ? mid : G.lo, first_half_holds ? G.hi : mid, r, nx, 0, R, r, nx);
                    cudaEventRecord(ef, sf);
                    phase3(G, sh, r, first_half_holds ? G.lo : mid, first_half_holds ? mid : G.hi, r, nx, 0, R, r, nx);
                    cudaEventRecord(eh, sh);
                }
                if (nx < R) {
                    if (nx >= G.lo && nx < G.hi) phase3(G, G.s0, r, nx, nx + 1, -1, -1, 0, R, r, -1);
                    phase3(G, G.s0, r, G.lo, G.hi, r, nx, nx, nx + 1, -1, -1);
                }
            }
            if (nx < R) CHECK(prepare(nx, false));
            for (int g = 0; g < gpus; ++g) {
                cudaSetDevice(gpu[g].dev);
                cudaEventRecord(gpu[g].ready, gpu[g].s0);
            }
        } else if (LOOKAHEAD && nx < R) {
            // First the tiles of row and column nx (the next pivot's), then phases 1-2 of round nx on the
            // side stream while the rest of phase 3 of round r runs on the main one.
            for (int g = 0; g < gpus; ++g) {
                Gpu &G = gpu[g];
                cudaSetDevice(G.dev);
                if (nx >= G.lo && nx < G.hi) phase3(G, G.s0, r, nx, nx + 1, -1, -1, 0, R, r, -1);
                phase3(G, G.s0, r, G.lo, G.hi, r, nx, nx, nx + 1, -1, -1);
                cudaEventRecord(G.cross, G.s0);
                cudaStreamWaitEvent(G.s1, G.cross, 0);
            }
            CHECK(prepare(nx, true));
            for (int g = 0; g < gpus; ++g) {
                Gpu &G = gpu[g];
                cudaSetDevice(G.dev);
                cudaEventRecord(G.ready, G.s1);
                phase3(G, G.s0, r, G.lo, G.hi, r, nx, 0, R, r, nx);
                cudaStreamWaitEvent(G.s0, G.ready, 0);
            }
        } else {
            for (int g = 0; g < gpus; ++g) {
                Gpu &G = gpu[g];
                cudaSetDevice(G.dev);
                phase3(G, G.s0, r, G.lo, G.hi, r, -1, 0, R, r, -1);
            }
            if (nx < R) CHECK(prepare(nx, false));
        }
        CHECK(cudaGetLastError());
    }
    for (int g = 0; g < gpus; ++g) {
        Gpu &G = gpu[g];
        CHECK(cudaSetDevice(G.dev));
        if (LOOKAHEAD >= 2) CHECK(cudaStreamWaitEvent(G.s0, G.cross, 0));  // the last bulk of phase 3
        if (LOOKAHEAD == 3) CHECK(cudaStreamWaitEvent(G.s0, G.cross2, 0));
        CHECK(cudaEventRecord(G.done, G.s0));
    }
    CHECK(cudaSetDevice(0));
    for (int g = 0; g < gpus; ++g) CHECK(cudaStreamWaitEvent(gpu[0].s0, gpu[g].done, 0));
    CHECK(cudaEventRecord(stop, gpu[0].s0));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);

    for (int g = 0; g < gpus; ++g) {
        Gpu &G = gpu[g];  // each GPU holds the final rows it owns
        const int first = G.lo * BLOCK, last = G.hi * BLOCK < n ? G.hi * BLOCK : n;
        if (last <= first) continue;
        CHECK(cudaSetDevice(G.dev));
        CHECK(cudaMemcpy2D(dist + (size_t)first * n, sizeof(int) * n, G.D + (size_t)first * np, sizeof(int) * np,
                           sizeof(int) * n, last - first, cudaMemcpyDeviceToHost));
    }
    return ms;
}
