// Dense matrix multiplication C = A B on the CPU (seed 004: loop order for locality, SIMD, OpenMP, tiling),
// row-major A (M x K), B (K x N), C (M x N) of T (int or float: the dtype's #define). gemm_cpu returns its
// own time in ms (everything it does, a transpose or packing included).
//
// Parameters (each a #define put in front by the tuner):
//   VARIANT   1: the seed's "change order" i-k-j loop, C's rows updated by broadcast A[i][k] times B's row k
//                (tiles of BM rows x BN columns, K in blocks of BK; 0: whole);
//             2: the seed's transpose: B transposed first, then dot products of A's and B^T's rows
//                (MR x NRV of them at once), horizontal sums at the end;
//             3: packed register tiles: BK x BN blocks of B and BM x BK blocks of A copied into panels,
//                an MR x (NRV * VEC) tile of C held in registers over the block's K
//   THREADS   OpenMP threads; 0: one per CPU the process may use
//   VEC       elements per SIMD vector (GCC vector extensions): 4 (SSE), 8 (AVX2: the seed's), 16 (AVX-512,
//             or two AVX2 halves)
//   MR, NRV   the register tile of variants 2 and 3
//   BM, BN, BK  cache tiles (the unit of work shared out to threads: BM x BN of C)
//   SCHEDULE  OpenMP schedule of the tiles: 0 static, 1 dynamic
//   PIN       0: threads unpinned; 1: thread t on the t-th CPU (close); 2: spread evenly over the CPUs
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#ifndef T
#define T float
#endif
#ifndef VARIANT
#define VARIANT 3
#endif
#ifndef THREADS
#define THREADS 0
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef MR
#define MR 4
#endif
#ifndef NRV
#define NRV 2
#endif
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 256
#endif
#ifndef SCHEDULE
#define SCHEDULE 0
#endif
#ifndef PIN
#define PIN 0
#endif

#define NR (NRV * VEC)

typedef T vec __attribute__((vector_size(VEC * sizeof(T)), aligned(sizeof(T))));

static inline vec vload(const T *p) { return *(const vec *)p; }
static inline void vstore(T *p, vec v) { *(vec *)p = v; }
static inline long min_l(long a, long b) { return a < b ? a : b; }

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

#if VARIANT == 1
static void tile_ikj(const T *A, const T *B, T *C, long N, long K, long i0, long i1, long j0, long j1) {
    const long bk = BK > 0 ? BK : K, vend = j0 + (j1 - j0) / VEC * VEC;
    for (long i = i0; i < i1; ++i) memset(C + i * N + j0, 0, (j1 - j0) * sizeof(T));
    for (long k0 = 0; k0 < K; k0 += bk)
        for (long i = i0; i < i1; ++i) {
            T *c = C + i * N;
            for (long k = k0; k < min_l(k0 + bk, K); ++k) {
                const T a = A[i * K + k];
                const vec av = (vec){} + a;
                const T *b = B + k * N;
                long j = j0;
                for (; j < vend; j += VEC) vstore(c + j, vload(c + j) + av * vload(b + j));
                for (; j < j1; ++j) c[j] += a * b[j];
            }
        }
}
#endif

#if VARIANT == 2
// rows i0.. of A against rows j0.. of B^T: MR x NRV dot products at once
static void tile_dots(const T *A, const T *Bt, T *C, long M, long N, long K, long i0, long i1, long j0, long j1) {
    const long kend = K / VEC * VEC;
    for (long i = i0; i < i1; i += MR)
        for (long j = j0; j < j1; j += NRV) {
            const T *a[MR];
            const T *b[NRV];
            for (int r = 0; r < MR; ++r) a[r] = A + min_l(i + r, M - 1) * K;  // rows past the end: computed, not kept
            for (int v = 0; v < NRV; ++v) b[v] = Bt + min_l(j + v, N - 1) * K;
            vec acc[MR][NRV] = {};
            for (long k = 0; k < kend; k += VEC) {
                vec bv[NRV];
#pragma GCC unroll 16
                for (int v = 0; v < NRV; ++v) bv[v] = vload(b[v] + k);
#pragma GCC unroll 16
                for (int r = 0; r < MR; ++r) {
                    const vec av = vload(a[r] + k);
#pragma GCC unroll 16
                    for (int v = 0; v < NRV; ++v) acc[r][v] += av * bv[v];
                }
            }
            for (int r = 0; r < MR; ++r)
                for (int v = 0; v < NRV; ++v) {
                    T sum = 0;
                    for (int e = 0; e < VEC; ++e) sum += acc[r][v][e];
                    for (long k = kend; k < K; ++k) sum += a[r][k] * b[v][k];
                    if (i + r < i1 && j + v < j1) C[(i + r) * N + j + v] = sum;
                }
        }
}
#endif

#if VARIANT == 3
// A's rows i0..i0+mb, columns k0..k0+kb as panels of MR rows, k-major within a panel (zero rows past the end)
static void pack_a(const T *A, long K, long i0, long mb, long k0, long kb, T *Ap) {
    for (long p = 0; p < mb; p += MR)
        for (long k = 0; k < kb; ++k)
            for (int r = 0; r < MR; ++r) *Ap++ = p + r < mb ? A[(i0 + p + r) * K + k0 + k] : (T)0;
}

// B's rows k0..k0+kb, columns j0..j0+nb as panels of NR columns, k-major (zero columns past the end)
static void pack_b(const T *B, long N, long k0, long kb, long j0, long nb, T *Bp) {
    for (long q = 0; q < nb; q += NR)
        for (long k = 0; k < kb; ++k) {
            const T *row = B + (k0 + k) * N + j0 + q;
            if (q + NR <= nb) {
                memcpy(Bp, row, NR * sizeof(T));
            } else {
                for (long c = 0; c < NR; ++c) Bp[c] = q + c < nb ? row[c] : (T)0;
            }
            Bp += NR;
        }
}

// C's mr x nr tile (at most MR x NR) = (first ? 0 : C) + A panel x B panel
static void micro_tile(const T *Ap, const T *Bp, long kb, T *C, long ldc, long mr, long nr, bool first) {
    vec acc[MR][NRV] = {};
    for (long k = 0; k < kb; ++k) {
        vec b[NRV];
#pragma GCC unroll 16
        for (int v = 0; v < NRV; ++v) b[v] = vload(Bp + k * NR + v * VEC);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const vec a = (vec){} + Ap[k * MR + r];
#pragma GCC unroll 16
            for (int v = 0; v < NRV; ++v) acc[r][v] += a * b[v];
        }
    }
    if (mr == MR && nr == NR) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
            for (int v = 0; v < NRV; ++v) {
                T *c = C + r * ldc + v * VEC;
                vstore(c, first ? acc[r][v] : vload(c) + acc[r][v]);
            }
        return;
    }
    for (long r = 0; r < mr; ++r)
        for (long c = 0; c < nr; ++c) {
            const T x = acc[r][c / VEC][c % VEC];
            C[r * ldc + c] = first ? x : C[r * ldc + c] + x;
        }
}
#endif

extern "C" float gemm_cpu(const T *A, const T *B, T *C, int M, int N, int K) {
    const int threads = THREADS > 0 ? THREADS : omp_get_num_procs();
    cpu_set_t cpus;  // every CPU this process may use: threads left unpinned at the end run on these
    CPU_ZERO(&cpus);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &cpus);
#pragma omp parallel num_threads(threads)
    place_thread(&cpus, PIN, omp_get_thread_num(), threads);
    omp_set_schedule(SCHEDULE == 0 ? omp_sched_static : omp_sched_dynamic, 0);
    const long bn = BN > 0 ? BN : N;
    const long tiles_m = (M + BM - 1) / BM, tiles_n = (N + bn - 1) / bn;

    const double start = omp_get_wtime();
#if VARIANT == 1
#pragma omp parallel for collapse(2) schedule(runtime) num_threads(threads)
    for (long ti = 0; ti < tiles_m; ++ti)
        for (long tj = 0; tj < tiles_n; ++tj)
            tile_ikj(A, B, C, N, K, ti * BM, min_l(ti * BM + BM, M), tj * bn, min_l(tj * bn + bn, N));
#elif VARIANT == 2
    T *Bt = (T *)aligned_alloc(64, ((size_t)N * K * sizeof(T) + 63) / 64 * 64);
    if (Bt == NULL) return -1.0f;
#pragma omp parallel num_threads(threads)
    {
#pragma omp for collapse(2) schedule(static)
        for (long k0 = 0; k0 < K; k0 += 32)
            for (long j0 = 0; j0 < N; j0 += 32)
                for (long k = k0; k < min_l(k0 + 32, K); ++k)
                    for (long j = j0; j < min_l(j0 + 32, N); ++j) Bt[j * K + k] = B[k * N + j];
#pragma omp for collapse(2) schedule(runtime)
        for (long ti = 0; ti < tiles_m; ++ti)
            for (long tj = 0; tj < tiles_n; ++tj)
                tile_dots(A, Bt, C, M, N, K, ti * BM, min_l(ti * BM + BM, M), tj * bn, min_l(tj * bn + bn, N));
    }
    free(Bt);
#else
#pragma omp parallel num_threads(threads)
    {
        const long pa = (BM + MR - 1) / MR * MR * BK, pb = (bn + NR - 1) / NR * NR * BK;
        T *Ap = (T *)aligned_alloc(64, (pa * sizeof(T) + 63) / 64 * 64);
        T *Bp = (T *)aligned_alloc(64, (pb * sizeof(T) + 63) / 64 * 64);
#pragma omp for collapse(2) schedule(runtime)
        for (long ti = 0; ti < tiles_m; ++ti)
            for (long tj = 0; tj < tiles_n; ++tj) {
                const long i0 = ti * BM, mb = min_l(BM, M - i0), j0 = tj * bn, nb = min_l(bn, N - j0);
                for (long k0 = 0; k0 < K; k0 += BK) {
                    const long kb = min_l(BK, K - k0);
                    pack_b(B, N, k0, kb, j0, nb, Bp);
                    pack_a(A, K, i0, mb, k0, kb, Ap);
                    for (long q = 0; q < nb; q += NR)
                        for (long p = 0; p < mb; p += MR)
                            micro_tile(Ap + p * kb, Bp + q * kb, kb, C + (i0 + p) * N + j0 + q, N, min_l(MR, mb - p),
                                       min_l(NR, nb - q), k0 == 0);
                }
            }
        free(Ap);
        free(Bp);
    }
#endif
    const double stop = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    place_thread(&cpus, 0, 0, threads);  // unpinned for whatever runs next
    return (float)((stop - start) * 1e3);
}
