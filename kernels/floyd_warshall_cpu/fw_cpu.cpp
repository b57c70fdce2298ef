// Blocked Floyd-Warshall on the CPU (seed 000's hw3-1): OpenMP threads over tiles, SIMD over columns.
//
// floyd_warshall_cpu(edges, dist, n, m) builds the distance matrix from the edge list (padded to a multiple
// of BLOCK, INF = 2^30 - 1), runs every round's three phases, copies the n x n distances into `dist` and
// returns the time of the rounds in ms (building and copying excluded, as in the GPU pipeline).
//
// Parameters (each a #define put in front by the tuner):
//   BLOCK     tile side (the seed: 64)
//   THREADS   OpenMP threads; 0: one per CPU the process may use (the seed's cpu_num)
//   SCHEDULE  OpenMP schedule of the tile loops: 0 static, 1 dynamic (the seed's), 2 guided
//   VEC       ints per SIMD vector (GCC vector extensions): 4 = SSE (the seed's _mm_min_epi32), 8 = AVX2,
//             16 = AVX-512 (two AVX2 halves where the CPU has no AVX-512)
//   RJ, RI    phase 3's register tile: RI rows x RJ vectors of a tile held in registers over all BLOCK
//             pivots; RJ 0: none (the seed's k-i-j loop, the tile read and written at every pivot)
//   LAYOUT    0: the matrix row-major; 1: tile-major (each tile contiguous)
//   PIN       0: threads unpinned; 1: thread t on the t-th CPU (close); 2: spread evenly over the CPUs
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#ifndef BLOCK
#define BLOCK 64
#endif
#ifndef THREADS
#define THREADS 0
#endif
#ifndef SCHEDULE
#define SCHEDULE 1
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef RI
#define RI 1
#endif
#ifndef RJ
#define RJ 0
#endif
#ifndef LAYOUT
#define LAYOUT 0
#endif
#ifndef PIN
#define PIN 0
#endif

#define FW_INF 1073741823  // 2^30 - 1: INF + INF still fits in an int

#if BLOCK % VEC != 0 || (RJ > 0 && BLOCK % (RJ * VEC) != 0) || BLOCK % RI != 0
#error "BLOCK must be a multiple of VEC, RJ * VEC and RI"
#endif

// unaligned vectors of VEC ints; `a < b ? a : b` is an element-wise min (vpminsd)
typedef int vint __attribute__((vector_size(VEC * sizeof(int)), aligned(sizeof(int))));

static inline vint vload(const int *p) { return *(const vint *)p; }
static inline void vstore(int *p, vint v) { *(vint *)p = v; }
static inline vint vmin(vint a, vint b) { return a < b ? a : b; }

#if LAYOUT == 0
#define LD np
static inline int *tile_at(int *d, long np, long, long bi, long bj) { return d + bi * BLOCK * np + bj * BLOCK; }
#else
#define LD BLOCK
static inline int *tile_at(int *d, long, long rounds, long bi, long bj) {
    return d + (bi * rounds + bj) * BLOCK * BLOCK;
}
#endif

// C[i][j] = min(C[i][j], A[i][k] + B[k][j]), pivots k outer: right for tiles that hold their own pivots
// (phases 1 and 2, where A or B is C: with d[k][k] = 0 a pivot's row and column do not change in its step)
static void relax_kij(int *C, const int *A, const int *B, long ld) {
    for (int k = 0; k < BLOCK; ++k) {
        const int *bk = B + k * ld;
        for (int i = 0; i < BLOCK; ++i) {
            int *ci = C + i * ld;
            const vint a = (vint){} + A[i * ld + k];
            for (int j = 0; j < BLOCK; j += VEC) vstore(ci + j, vmin(vload(ci + j), a + vload(bk + j)));
        }
    }
}

#if RJ > 0
// phase 3 (A and B are other tiles, fixed): RI x RJ vectors of C stay in registers over every pivot
static void relax_registers(int *C, const int *A, const int *B, long ld) {
    for (int i0 = 0; i0 < BLOCK; i0 += RI) {
        for (int j0 = 0; j0 < BLOCK; j0 += RJ * VEC) {
            vint acc[RI][RJ];
#pragma GCC unroll 16
            for (int r = 0; r < RI; ++r)
#pragma GCC unroll 16
                for (int v = 0; v < RJ; ++v) acc[r][v] = vload(C + (i0 + r) * ld + j0 + v * VEC);
            for (int k = 0; k < BLOCK; ++k) {
                vint b[RJ];
#pragma GCC unroll 16
                for (int v = 0; v < RJ; ++v) b[v] = vload(B + k * ld + j0 + v * VEC);
#pragma GCC unroll 16
                for (int r = 0; r < RI; ++r) {
                    const vint a = (vint){} + A[(i0 + r) * ld + k];
#pragma GCC unroll 16
                    for (int v = 0; v < RJ; ++v) acc[r][v] = vmin(acc[r][v], a + b[v]);
                }
            }
#pragma GCC unroll 16
            for (int r = 0; r < RI; ++r)
#pragma GCC unroll 16
                for (int v = 0; v < RJ; ++v) vstore(C + (i0 + r) * ld + j0 + v * VEC, acc[r][v]);
        }
    }
}
#define PHASE3 relax_registers
#else
#define PHASE3 relax_kij
#endif

// Pin the calling thread (PIN 1: the t-th CPU of `cpus`; 2: spread evenly), or let it run on all of `cpus`.
// The thread pool outlives this library (the next configuration reuses it), so every call sets it.
static void place_thread(const cpu_set_t *cpus, int pin, int t, int threads) {
    int count = CPU_COUNT(cpus), want = -1;
    if (pin == 1) want = t % count;
    if (pin == 2) want = (int)((long)t * count / (threads > count ? threads : count)) % count;
    if (want < 0) {
        sched_setaffinity(0, sizeof(cpu_set_t), cpus);
        return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, cpus) && seen++ == want) {
            CPU_SET(c, &one);
            break;
        }
    }
    sched_setaffinity(0, sizeof(cpu_set_t), &one);
}

extern "C" float floyd_warshall_cpu(const int *edges, int *dist, int n, int m) {
    const long rounds = (n + BLOCK - 1) / BLOCK, np = rounds * BLOCK;
    int *d = (int *)aligned_alloc(64, ((size_t)np * np * sizeof(int) + 63) / 64 * 64);
    if (d == NULL) return -1.0f;
    cpu_set_t cpus;  // every CPU this process may use: threads left unpinned at the end run on these
    CPU_ZERO(&cpus);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &cpus);
    const int threads = THREADS > 0 ? THREADS : omp_get_num_procs();

    // set-up, not timed: place the threads, fill the matrix (first touch by the threads that work on it)
#pragma omp parallel num_threads(threads)
    {
        place_thread(&cpus, PIN, omp_get_thread_num(), threads);
#pragma omp for schedule(static)
        for (long bi = 0; bi < rounds; ++bi)
            for (long bj = 0; bj < rounds; ++bj) {
                int *t = tile_at(d, np, rounds, bi, bj);
                for (int i = 0; i < BLOCK; ++i)
                    for (int j = 0; j < BLOCK; ++j) t[i * LD + j] = (bi * BLOCK + i == bj * BLOCK + j) ? 0 : FW_INF;
            }
    }
    for (int e = 0; e < m; ++e) {
        const int u = edges[3 * e], v = edges[3 * e + 1], w = edges[3 * e + 2];
        int *x = tile_at(d, np, rounds, u / BLOCK, v / BLOCK) + (u % BLOCK) * LD + v % BLOCK;
        if (u != v && w < *x) *x = w;
    }
    const omp_sched_t kinds[] = {omp_sched_static, omp_sched_dynamic, omp_sched_guided};
    omp_set_schedule(kinds[SCHEDULE], 0);

    const double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    for (long r = 0; r < rounds; ++r) {
        int *pivot = tile_at(d, np, rounds, r, r);
#pragma omp single
        relax_kij(pivot, pivot, pivot, LD);
        // phase 2: the pivot row's and column's other tiles
#pragma omp for schedule(runtime)
        for (long t = 0; t < 2 * rounds; ++t) {
            const long b = t / 2;
            if (b == r) continue;
            if (t % 2 == 0) {
                int *c = tile_at(d, np, rounds, r, b);
                relax_kij(c, pivot, c, LD);
            } else {
                int *c = tile_at(d, np, rounds, b, r);
                relax_kij(c, c, pivot, LD);
            }
        }
        // phase 3: every other tile, from its pivot-column and pivot-row tiles
#pragma omp for collapse(2) schedule(runtime)
        for (long bi = 0; bi < rounds; ++bi)
            for (long bj = 0; bj < rounds; ++bj) {
                if (bi == r || bj == r) continue;
                PHASE3(tile_at(d, np, rounds, bi, bj), tile_at(d, np, rounds, bi, r), tile_at(d, np, rounds, r, bj), LD);
            }
    }
    const double stop = omp_get_wtime();

#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
        for (long i = 0; i < n; ++i)
            for (long j = 0; j < n; ++j)
                dist[i * n + j] = tile_at(d, np, rounds, i / BLOCK, j / BLOCK)[(i % BLOCK) * LD + j % BLOCK];
        place_thread(&cpus, 0, 0, threads);  // unpinned for whatever runs next
    }
    free(d);
    return (float)((stop - start) * 1e3);
}
