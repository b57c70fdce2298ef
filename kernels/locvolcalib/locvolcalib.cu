// LocVolCalib (Finpar / PMPH course project, seed 003): K independent ADI solves of a two-factor PDE,
// T-1 backward time steps each, run as one GPU pipeline. The host function `locvolcalib` times the whole
// computation (payoff, every time step and kernel, the result gather) with CUDA events and returns ms.
//
// STRUCTURE 0: the seed's naive structure. Every per-k array is expanded over the outer dimension
//   (VarX, VarY, U, V, the a/b/c/y of both tridiagonal phases, the Thomas scratch), the original storage
//   orientation is kept (U is [k][j][i], R and V are [k][i][j]) and each distributed loop is one kernel
//   (7 per time step); a Thomas solve per thread walks its system in global memory.
// STRUCTURE 1: optimised. Arrays are [k][i][j]. Per step: (SHARE_COEF) one kernel computing VarX and VarY,
//   which do not depend on k (SPEC §2.6), for all K solves (and, for Thomas, the LU factors of both
//   directions); (unless FUSE_EXPLICIT) an explicit kernel; kernel X (the explicit steps fused in its load
//   when FUSE_EXPLICIT, then the x-solves on a [M][TILE_X] shared-memory tile, writing the y right-hand
//   side) and kernel Y (the y-solves on a [TILE_Y][N] tile, writing R). A tile is read and written
//   coalesced whichever way its systems run: the shared-memory tile is the transposition.
//   SOLVER_X/Y 0: Thomas, one thread per system ("OUT"); 1: cyclic reduction by the whole block ("ALL");
//   2: partitioned Thomas, one thread per segment of SEG rows held in registers, plus a reduced system.
// STRUCTURE 2: a warp per system. Arrays are [k][i][j]. The coefficients and LU factors of STEPS time steps
//   are computed ahead by two small kernels (they do not depend on k); per step, warp_kernel_x (explicit
//   steps fused, x-solves) and warp_kernel_y (y-solves), each system held by one warp in registers and
//   solved by a shuffle scan; tiles pass through shared memory so global memory is read and written
//   coalesced in both directions; KPB outer indices per block share the factors held in registers.
//
// REAL is float or double (the space's dtypes). Parameters: STRUCTURE, SHARE_COEF, FUSE_EXPLICIT,
// SOLVER_X, SOLVER_Y, TILE_X, TILE_Y, BLOCK (threads of the element-wise kernels and of the tile kernels
// with solvers 0 and 1; a partitioned solve takes one thread per segment), KPB, STEPS, XFORM and XREGS
// (STRUCTURE 2: the x-kernel's form and register budget, see warp_kernel_x; both 0 unless given, the kernel
// as it was before they existed).
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <vector>

#ifndef XFORM
#define XFORM 0
#endif
#ifndef XREGS
#define XREGS 0
#endif

struct Grid {
    int K, M, N;
    int course;         // VarY: exp(...) in the course variant, nu*nu in Finpar
    REAL beta, alpha, nunu;
    const REAL *lnx;    // [M] ln X[i]
    const REAL *y;      // [N]
    const REAL *dxx;    // [M][3]
    const REAL *dyy;    // [N][3]
};

struct Step {
    REAL dt_inv;  // 1 / (timeline[g+1] - timeline[g])
    REAL drift;   // 0.5 * nu * nu * timeline[g]
};

__device__ __forceinline__ REAL var_x(const Grid &g, const Step &s, int i, int j) {
    return exp(REAL(2) * (g.beta * g.lnx[i] + g.y[j] - s.drift));
}

__device__ __forceinline__ REAL var_y(const Grid &g, const Step &s, int i, int j) {
    return g.course ? exp(REAL(2) * (g.alpha * g.lnx[i] + g.y[j] - s.drift)) : g.nunu;
}

__device__ __forceinline__ size_t at(int k, int i, int j, int M, int N) {
    return ((size_t)k * M + i) * N + j;
}

__global__ void payoff_kernel(REAL *r, const REAL *x, int K, int M, int N) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)K * M * N) return;
    int i = (int)((e / N) % M), k = (int)(e / ((size_t)M * N));
    REAL v = x[i] - REAL(0.001) * REAL(k);
    r[e] = v > REAL(0) ? v : REAL(0);
}

__global__ void gather_kernel(REAL *res, const REAL *r, int K, int M, int N, int ind_x, int ind_y) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < K) res[k] = r[at(k, ind_x, ind_y, M, N)];
}

// =====================================================================================================
// STRUCTURE 0: naive, one kernel per distributed loop, everything expanded over k
// =====================================================================================================
__global__ void naive_update_params(REAL *varx, REAL *vary, Grid g, Step s) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * g.M * g.N) return;
    int j = (int)(e % g.N), i = (int)((e / g.N) % g.M);
    varx[e] = var_x(g, s, i, j);
    vary[e] = var_y(g, s, i, j);
}

// U[k][j][i] = dtInv*R + 0.5*(Lx R), thread per (k, j, i)
__global__ void naive_explicit_x(REAL *u, const REAL *r, const REAL *varx, Grid g, Step s) {
    int M = g.M, N = g.N;
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * M * N) return;
    int i = (int)(e % M), j = (int)((e / M) % N), k = (int)(e / ((size_t)M * N));
    size_t c = at(k, i, j, M, N);
    REAL vx = varx[c], acc = s.dt_inv * r[c];
    if (i > 0) acc += REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i]) * r[c - N];
    acc += REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i + 1]) * r[c];
    if (i < M - 1) acc += REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i + 2]) * r[c + N];
    u[e] = acc;
}

// V[k][i][j] = Ly R; U[k][j][i] += V, thread per (k, i, j)
__global__ void naive_explicit_y(REAL *u, REAL *v, const REAL *r, const REAL *vary, Grid g) {
    int M = g.M, N = g.N;
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * M * N) return;
    int j = (int)(e % N), i = (int)((e / N) % M), k = (int)(e / ((size_t)M * N));
    REAL vy = vary[e], acc = REAL(0);
    if (j > 0) acc += (REAL(0.5) * vy * g.dyy[3 * j]) * r[e - 1];
    acc += (REAL(0.5) * vy * g.dyy[3 * j + 1]) * r[e];
    if (j < N - 1) acc += (REAL(0.5) * vy * g.dyy[3 * j + 2]) * r[e + 1];
    v[e] = acc;
    u[((size_t)k * N + j) * M + i] += acc;
}

// a, b, c of the x-systems, [k][j][i]
__global__ void naive_coef_x(REAL *a, REAL *b, REAL *c, const REAL *varx, Grid g, Step s) {
    int M = g.M, N = g.N;
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * M * N) return;
    int i = (int)(e % M), j = (int)((e / M) % N), k = (int)(e / ((size_t)M * N));
    REAL vx = varx[at(k, i, j, M, N)];
    a[e] = -REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i]);
    b[e] = s.dt_inv - REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i + 1]);
    c[e] = -REAL(0.5) * (REAL(0.5) * vx * g.dxx[3 * i + 2]);
}

// a, b, c and the right-hand side of the y-systems, [k][i][j]
__global__ void naive_coef_y(REAL *a, REAL *b, REAL *c, REAL *y, const REAL *u, const REAL *v, const REAL *vary,
                             Grid g, Step s) {
    int M = g.M, N = g.N;
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * M * N) return;
    int j = (int)(e % N), i = (int)((e / N) % M), k = (int)(e / ((size_t)M * N));
    REAL vy = vary[e];
    a[e] = -REAL(0.5) * (REAL(0.5) * vy * g.dyy[3 * j]);
    b[e] = s.dt_inv - REAL(0.5) * (REAL(0.5) * vy * g.dyy[3 * j + 1]);
    c[e] = -REAL(0.5) * (REAL(0.5) * vy * g.dyy[3 * j + 2]);
    y[e] = s.dt_inv * u[((size_t)k * N + j) * M + i] - REAL(0.5) * v[e];
}

// Thomas (SPEC §3), one system of n contiguous values per thread, nsys systems
__global__ void naive_tridag(const REAL *a, const REAL *b, const REAL *c, const REAL *rhs, REAL *u, REAL *uu,
                             int n, int nsys) {
    int sys = blockIdx.x * blockDim.x + threadIdx.x;
    if (sys >= nsys) return;
    size_t o = (size_t)sys * n;
    uu[o] = b[o];
    u[o] = rhs[o];
    for (int i = 1; i < n; ++i) {
        REAL beta = a[o + i] / uu[o + i - 1];
        uu[o + i] = b[o + i] - beta * c[o + i - 1];
        u[o + i] = rhs[o + i] - beta * u[o + i - 1];
    }
    u[o + n - 1] = u[o + n - 1] / uu[o + n - 1];
    for (int i = n - 2; i >= 0; --i) u[o + i] = (u[o + i] - c[o + i] * u[o + i + 1]) / uu[o + i];
}

// =====================================================================================================
// STRUCTURE 1: optimised
// =====================================================================================================
// Shared coefficient arrays (SHARE_COEF), computed once per time step for all K solves (SPEC §2.6).
struct Coef {
    REAL *vx, *vy;         // VarX, VarY [M][N]
    REAL *xbeta, *xinv;    // Thomas factors of the x-systems (along i), [M][N]: a_i / uu_{i-1} and 1 / uu_i
    REAL *ybeta, *yinv;    // same for the y-systems (along j), stored [j][i] so the y-solve reads them coalesced
    REAL *ygam;            // STRUCTURE 2 only: c_j / uu_j of the y-systems; its factors are lane-major (warp_coef_at)
};

__global__ void coef_kernel(Coef cf, Grid g, Step s) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= g.M * g.N) return;
    int i = e / g.N, j = e % g.N;
    cf.vx[e] = var_x(g, s, i, j);
    cf.vy[e] = var_y(g, s, i, j);
}

// operator weights at (i, j): from the shared arrays, or computed here (one exp per direction)
// VarX and VarY at (i, j): from the shared arrays, or computed here (one exp each)
__device__ __forceinline__ REAL varx_at(const Coef &cf, const Grid &g, const Step &s, int i, int j) {
#if SHARE_COEF
    return cf.vx[i * g.N + j];
#else
    return var_x(g, s, i, j);
#endif
}

__device__ __forceinline__ REAL vary_at(const Coef &cf, const Grid &g, const Step &s, int i, int j) {
#if SHARE_COEF
    return cf.vy[i * g.N + j];
#else
    return var_y(g, s, i, j);
#endif
}

// operator weights at (i, j)
__device__ __forceinline__ void weights_x(const Coef &cf, const Grid &g, const Step &s, int i, int j, REAL w[3]) {
    REAL v = varx_at(cf, g, s, i, j);
    w[0] = REAL(0.5) * v * g.dxx[3 * i]; w[1] = REAL(0.5) * v * g.dxx[3 * i + 1]; w[2] = REAL(0.5) * v * g.dxx[3 * i + 2];
}

__device__ __forceinline__ void weights_y(const Coef &cf, const Grid &g, const Step &s, int i, int j, REAL w[3]) {
    REAL v = vary_at(cf, g, s, i, j);
    w[0] = REAL(0.5) * v * g.dyy[3 * j]; w[1] = REAL(0.5) * v * g.dyy[3 * j + 1]; w[2] = REAL(0.5) * v * g.dyy[3 * j + 2];
}

// the tridiagonal rows: x-systems run along i at column j, y-systems along j at row i (SPEC §2.6 steps 3-4)
__device__ __forceinline__ void row_x(const Coef &cf, const Grid &g, const Step &s, int i, int j, REAL &a, REAL &b, REAL &c) {
    REAL w[3];
    weights_x(cf, g, s, i, j, w);
    a = i > 0 ? -REAL(0.5) * w[0] : REAL(0);
    b = s.dt_inv - REAL(0.5) * w[1];
    c = i < g.M - 1 ? -REAL(0.5) * w[2] : REAL(0);
}

__device__ __forceinline__ void row_y(const Coef &cf, const Grid &g, const Step &s, int i, int j, REAL &a, REAL &b, REAL &c) {
    REAL w[3];
    weights_y(cf, g, s, i, j, w);
    a = j > 0 ? -REAL(0.5) * w[0] : REAL(0);
    b = s.dt_inv - REAL(0.5) * w[1];
    c = j < g.N - 1 ? -REAL(0.5) * w[2] : REAL(0);
}

// The LU (Thomas) factors of one system of n rows (SPEC §3), for both directions: rows(p, a, b, c) gives
// row p, put(p, beta, inv, c) takes beta_p = a_p / uu_{p-1} (0 at p = 0), inv_p = 1 / uu_p and c_p.
template <class Rows, class Put>
__device__ void lu_factor(int n, Rows rows, Put put) {
    REAL a, b, c, cprev, uu;
    rows(0, a, uu, cprev);
    put(0, REAL(0), REAL(1) / uu, cprev);
    for (int p = 1; p < n; ++p) {
        rows(p, a, b, c);
        REAL beta = a / uu;
        uu = b - beta * cprev;
        cprev = c;
        put(p, beta, REAL(1) / uu, c);
    }
}

// The LU factors of both directions (SOLVER 0 with SHARE_COEF): threads [0, N) take column j (an x-system,
// factors [i][j]), [N, N+M) row i (a y-system, factors [j][i] so the y-solve reads them coalesced).
__global__ void factor_kernel(Coef cf, Grid g, Step s) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, M = g.M, N = g.N;
    if (t < N) {
        lu_factor(M, [&](int i, REAL &a, REAL &b, REAL &c) { row_x(cf, g, s, i, t, a, b, c); },
                  [&](int i, REAL beta, REAL inv, REAL) { cf.xbeta[i * N + t] = beta; cf.xinv[i * N + t] = inv; });
    } else if (t < N + M) {
        const int i = t - N;
        lu_factor(N, [&](int j, REAL &a, REAL &b, REAL &c) { row_y(cf, g, s, i, j, a, b, c); },
                  [&](int j, REAL beta, REAL inv, REAL) { cf.ybeta[j * M + i] = beta; cf.yinv[j * M + i] = inv; });
    }
}

// The explicit steps at (i, j) given VarY / VarX there; val(di, dj) is R at (i + di, j + dj), read from global
// or shared memory. V = Ly R:
template <class Val>
__device__ __forceinline__ REAL ly_v(const Grid &g, REAL vy, int j, Val val) {
    const REAL w0 = REAL(0.5) * vy * g.dyy[3 * j], w1 = REAL(0.5) * vy * g.dyy[3 * j + 1], w2 = REAL(0.5) * vy * g.dyy[3 * j + 2];
    REAL acc = REAL(0);
    if (j > 0) acc += w0 * val(0, -1);
    acc += w1 * val(0, 0);
    if (j < g.N - 1) acc += w2 * val(0, 1);
    return acc;
}

// dtInv*R + 0.5*(Lx R); the x right-hand side adds V
template <class Val>
__device__ __forceinline__ REAL explicit_x_v(const Grid &g, const Step &s, REAL vx, int i, Val val) {
    const REAL w0 = REAL(0.5) * vx * g.dxx[3 * i], w1 = REAL(0.5) * vx * g.dxx[3 * i + 1], w2 = REAL(0.5) * vx * g.dxx[3 * i + 2];
    REAL acc = s.dt_inv * val(0, 0);
    if (i > 0) acc += REAL(0.5) * w0 * val(-1, 0);
    acc += REAL(0.5) * w1 * val(0, 0);
    if (i < g.M - 1) acc += REAL(0.5) * w2 * val(1, 0);
    return acc;
}

template <class Val>
__device__ __forceinline__ REAL ly_at(const Coef &cf, const Grid &g, const Step &s, int i, int j, Val val) {
    return ly_v(g, vary_at(cf, g, s, i, j), j, val);
}

template <class Val>
__device__ __forceinline__ REAL explicit_x_at(const Coef &cf, const Grid &g, const Step &s, int i, int j, Val val) {
    return explicit_x_v(g, s, varx_at(cf, g, s, i, j), i, val);
}

__device__ __forceinline__ REAL explicit_y(const REAL *r, const Coef &cf, const Grid &g, const Step &s, int k, int i, int j) {
    const size_t c = at(k, i, j, g.M, g.N);
    return ly_at(cf, g, s, i, j, [&](int di, int dj) { return r[c + (ptrdiff_t)di * g.N + dj]; });
}

// the right-hand side of the x-systems: dtInv*R + 0.5*(Lx R) + Ly R
__device__ __forceinline__ REAL rhs_x(const REAL *r, const Coef &cf, const Grid &g, const Step &s, int k, int i, int j) {
    const size_t c = at(k, i, j, g.M, g.N);
    auto val = [&](int di, int dj) { return r[c + (ptrdiff_t)di * g.N + dj]; };
    return explicit_x_at(cf, g, s, i, j, val) + ly_at(cf, g, s, i, j, val);
}

// the explicit steps as their own kernel: U (the x right-hand side) and V, both [k][i][j]
__global__ void explicit_kernel(REAL *u, REAL *v, const REAL *r, Coef cf, Grid g, Step s) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)g.K * g.M * g.N) return;
    int j = (int)(e % g.N), i = (int)((e / g.N) % g.M), k = (int)(e / ((size_t)g.M * g.N));
    u[e] = rhs_x(r, cf, g, s, k, i, j);
    v[e] = explicit_y(r, cf, g, s, k, i, j);
}

// SOLVER 1, "ALL": cyclic reduction of nsys systems of length n held in shared memory, element (pos, sys)
// at pos*ps + sys*ss, by the whole block; the solution overwrites d. In place: at level s the rows
// 2s-1 mod 2s are updated from rows s-1 mod 2s, which that level does not write.
__device__ void cyclic_reduction(REAL *a, REAL *b, REAL *c, REAL *d, int n, int nsys, int ps, int ss) {
    int tid = threadIdx.x, nth = blockDim.x;
    int top = 1;
    for (int s = 1; s < n; s <<= 1) {
        int cnt = n / (2 * s);
        for (int w = tid; w < cnt * nsys; w += nth) {
            int sys = w % nsys, e = 2 * s * (w / nsys + 1) - 1;
            int ie = e * ps + sys * ss, lo = ie - s * ps, hi = ie + s * ps;
            REAL k1 = a[ie] / b[lo];
            REAL an = -a[lo] * k1, bn = b[ie] - c[lo] * k1, dn = d[ie] - d[lo] * k1, cn = REAL(0);
            if (e + s < n) {
                REAL k2 = c[ie] / b[hi];
                bn -= a[hi] * k2;
                dn -= d[hi] * k2;
                cn = -c[hi] * k2;
            }
            a[ie] = an; b[ie] = bn; c[ie] = cn; d[ie] = dn;
        }
        __syncthreads();
        top = 2 * s;
    }
    for (int s = top; s >= 1; s >>= 1) {
        int cnt = (n + s) / (2 * s);
        for (int w = tid; w < cnt * nsys; w += nth) {
            int sys = w % nsys, e = s - 1 + 2 * s * (w / nsys);
            int ie = e * ps + sys * ss;
            REAL x = d[ie];
            if (e - s >= 0) x -= a[ie] * d[ie - s * ps];
            if (e + s < n) x -= c[ie] * d[ie + s * ps];
            d[ie] = x / b[ie];
        }
        __syncthreads();
    }
}

// SOLVER 2: partitioned Thomas. Each system is cut into P segments of 2..SEG rows, one thread per
// segment, rows in registers. Eliminating downwards then upwards inside a segment leaves every row coupled
// only to the segment's first and last unknowns; the first and last rows of all segments form a
// tridiagonal system of 2P unknowns, solved by one thread per system; the interior rows follow.
// Needs blockDim.x >= nsys * P; red holds nsys * 2P * 4 values.
#define SEG 8
template <class Rows>
__device__ void partitioned_thomas(REAL *d, REAL *red, int n, int nsys, int ps, int ss, int P, Rows rows) {
    const int t = threadIdx.x, sys = t % nsys, seg = t / nsys;
    const bool mine = seg < P;
    const int lo = mine ? seg * n / P : 0, len = mine ? (seg + 1) * n / P - lo : 0;
    REAL A[SEG], B[SEG], C[SEG], D[SEG];
#pragma unroll
    for (int q = 0; q < SEG; ++q) {
        A[q] = REAL(0); B[q] = REAL(1); C[q] = REAL(0); D[q] = REAL(0);
        if (q < len) {
            REAL a = REAL(0), b = REAL(1), c = REAL(0);
            rows(lo + q, sys, a, b, c);
            A[q] = a; B[q] = b; C[q] = c;
            D[q] = d[(lo + q) * ps + sys * ss];
        }
    }
    // downwards: row q couples x_lo instead of x_{q-1}; (la, lb, lc, ld) follows the row just done, so it
    // ends as the last row (a register recurrence: no indexing of the arrays by len)
    REAL la = A[1], lb = B[1], lc = C[1], ld = D[1];
#pragma unroll
    for (int q = 2; q < SEG; ++q) {
        if (q < len) {
            REAL k = A[q] / lb;
            A[q] = -k * la;
            B[q] -= k * lc;
            D[q] -= k * ld;
            la = A[q]; lb = B[q]; lc = C[q]; ld = D[q];
        }
    }
    // upwards over the interior: row q couples x_last instead of x_{q+1}
#pragma unroll
    for (int q = SEG - 3; q >= 1; --q) {
        if (q <= len - 3) {
            REAL k = C[q] / B[q + 1];
            A[q] -= k * A[q + 1];
            C[q] = -k * C[q + 1];
            D[q] -= k * D[q + 1];
        }
    }
    if (len >= 3) {  // the first row: couples x_{lo-1}, x_lo and x_last
        REAL k = C[0] / B[1];
        B[0] -= k * A[1];
        C[0] = -k * C[1];
        D[0] -= k * D[1];
    }
    if (mine) {  // the first row couples x_{lo-1}, x_lo, x_last; the last x_lo, x_last, x_{hi}
        REAL *r0 = red + ((size_t)sys * 2 * P + 2 * seg) * 4;
        r0[0] = A[0]; r0[1] = B[0]; r0[2] = C[0]; r0[3] = D[0];
        r0[4] = la; r0[5] = lb; r0[6] = lc; r0[7] = ld;
    }
    __syncthreads();
    if (t < nsys) {  // Thomas on the 2P interface unknowns; the solution replaces the d column
        REAL *r = red + (size_t)t * 2 * P * 4;
        const int m = 2 * P;
        REAL uu = r[1], prev = r[3];
        r[1] = uu;
        for (int q = 1; q < m; ++q) {
            REAL beta = r[4 * q] / uu;
            uu = r[4 * q + 1] - beta * r[4 * (q - 1) + 2];
            prev = r[4 * q + 3] - beta * prev;
            r[4 * q + 1] = uu;
            r[4 * q + 3] = prev;
        }
        prev /= uu;
        r[4 * (m - 1) + 3] = prev;
        for (int q = m - 2; q >= 0; --q) {
            prev = (r[4 * q + 3] - r[4 * q + 2] * prev) / r[4 * q + 1];
            r[4 * q + 3] = prev;
        }
    }
    __syncthreads();
    if (mine) {
        const REAL *r0 = red + ((size_t)sys * 2 * P + 2 * seg) * 4;
        REAL xl = r0[3], xr = r0[7];
#pragma unroll
        for (int q = 1; q < SEG; ++q)
            if (q < len - 1) d[(lo + q) * ps + sys * ss] = (D[q] - A[q] * xl - C[q] * xr) / B[q];
        d[lo * ps + sys * ss] = xl;
        d[(lo + len - 1) * ps + sys * ss] = xr;
    }
}

__host__ __device__ static inline int segments(int n) { return (n + SEG - 1) / SEG; }

// threads of the tile kernels: a partitioned solve needs one per segment
[[maybe_unused]] static int threads_x(int M) { return SOLVER_X == 2 ? (TILE_X * segments(M) + 31) / 32 * 32 : BLOCK; }
[[maybe_unused]] static int threads_y(int N) { return SOLVER_Y == 2 ? (TILE_Y * segments(N) + 31) / 32 * 32 : BLOCK; }
#define BOUNDS_X (SOLVER_X == 2 ? 512 : BLOCK)
#define BOUNDS_Y (SOLVER_Y == 2 ? 512 : BLOCK)

// Implicit x (and the explicit steps when fused): block (j-tile, k); tile [M][TILE_X] in shared memory.
// Writes the y right-hand side dtInv*Ux - 0.5*V into yr, [k][i][j].
__global__ void __launch_bounds__(BOUNDS_X) kernel_x(REAL *yr, const REAL *r, const REAL *u_in, const REAL *v_in,
                                                     Coef cf, Grid g, Step s) {
    extern __shared__ unsigned char smem_raw[];
    REAL *sm = reinterpret_cast<REAL *>(smem_raw);
    const int M = g.M, N = g.N, P = TILE_X + 1, k = blockIdx.y, j0 = blockIdx.x * TILE_X;
    [[maybe_unused]] const int tile = M * P;
    REAL *d = sm;
    for (int e = threadIdx.x; e < M * TILE_X; e += blockDim.x) {
        int i = e / TILE_X, jj = e % TILE_X, j = j0 + jj, p = i * P + jj;
        REAL rhs = REAL(0);
        if (j < N) {
#if FUSE_EXPLICIT
            rhs = rhs_x(r, cf, g, s, k, i, j);
#else
            rhs = u_in[at(k, i, j, M, N)];
#endif
        }
        d[p] = rhs;
#if SOLVER_X == 1
        REAL a = REAL(0), b = REAL(1), c = REAL(0);
        if (j < N) row_x(cf, g, s, i, j, a, b, c);
        sm[tile + p] = a; sm[2 * tile + p] = b; sm[3 * tile + p] = c;
#endif
    }
    __syncthreads();
#if SOLVER_X == 1
    cyclic_reduction(sm + tile, sm + 2 * tile, sm + 3 * tile, d, M, TILE_X, P, 1);
#elif SOLVER_X == 2
    partitioned_thomas(d, sm + tile, M, TILE_X, P, 1, segments(M), [&](int i, int jj, REAL &a, REAL &b, REAL &c) {
        if (j0 + jj < N) row_x(cf, g, s, i, j0 + jj, a, b, c);
    });
    __syncthreads();
#else
    if (threadIdx.x < TILE_X && j0 + threadIdx.x < N) {
        const int jj = threadIdx.x, j = j0 + jj;
#if SHARE_COEF
        REAL prev = d[jj];
        for (int i = 1; i < M; ++i) {
            prev = d[i * P + jj] - cf.xbeta[i * N + j] * prev;
            d[i * P + jj] = prev;
        }
        prev *= cf.xinv[(M - 1) * N + j];
        d[(M - 1) * P + jj] = prev;
        for (int i = M - 2; i >= 0; --i) {
            REAL a, b, c;
            row_x(cf, g, s, i, j, a, b, c);
            prev = (d[i * P + jj] - c * prev) * cf.xinv[i * N + j];
            d[i * P + jj] = prev;
        }
#else
        REAL *uu = sm + tile, a, b, c, cprev, ucur;
        row_x(cf, g, s, 0, j, a, ucur, cprev);
        REAL prev = d[jj];
        uu[jj] = ucur;
        for (int i = 1; i < M; ++i) {
            row_x(cf, g, s, i, j, a, b, c);
            REAL beta = a / ucur;
            ucur = b - beta * cprev;
            cprev = c;
            uu[i * P + jj] = ucur;
            prev = d[i * P + jj] - beta * prev;
            d[i * P + jj] = prev;
        }
        prev /= ucur;
        d[(M - 1) * P + jj] = prev;
        for (int i = M - 2; i >= 0; --i) {
            row_x(cf, g, s, i, j, a, b, c);
            prev = (d[i * P + jj] - c * prev) / uu[i * P + jj];
            d[i * P + jj] = prev;
        }
#endif
    }
    __syncthreads();
#endif
    for (int e = threadIdx.x; e < M * TILE_X; e += blockDim.x) {
        int i = e / TILE_X, jj = e % TILE_X, j = j0 + jj;
        if (j >= N) continue;
#if FUSE_EXPLICIT
        REAL v = explicit_y(r, cf, g, s, k, i, j);
#else
        REAL v = v_in[at(k, i, j, M, N)];
#endif
        yr[at(k, i, j, M, N)] = s.dt_inv * d[i * P + jj] - REAL(0.5) * v;
    }
}

// Implicit y: block (i-tile, k); tile [TILE_Y][N] in shared memory; the solution is the new R.
__global__ void __launch_bounds__(BOUNDS_Y) kernel_y(REAL *r, const REAL *yr, Coef cf, Grid g, Step s) {
    extern __shared__ unsigned char smem_raw[];
    REAL *sm = reinterpret_cast<REAL *>(smem_raw);
    const int M = g.M, N = g.N, P = N + 1, k = blockIdx.y, i0 = blockIdx.x * TILE_Y;
    [[maybe_unused]] const int tile = TILE_Y * P;
    REAL *d = sm;
    for (int e = threadIdx.x; e < TILE_Y * N; e += blockDim.x) {
        int ii = e / N, j = e % N, i = i0 + ii, p = ii * P + j;
        d[p] = i < M ? yr[at(k, i, j, M, N)] : REAL(0);
#if SOLVER_Y == 1
        REAL a = REAL(0), b = REAL(1), c = REAL(0);
        if (i < M) row_y(cf, g, s, i, j, a, b, c);
        sm[tile + p] = a; sm[2 * tile + p] = b; sm[3 * tile + p] = c;
#endif
    }
    __syncthreads();
#if SOLVER_Y == 1
    cyclic_reduction(sm + tile, sm + 2 * tile, sm + 3 * tile, d, N, TILE_Y, 1, P);
#elif SOLVER_Y == 2
    partitioned_thomas(d, sm + tile, N, TILE_Y, 1, P, segments(N), [&](int j, int ii, REAL &a, REAL &b, REAL &c) {
        if (i0 + ii < M) row_y(cf, g, s, i0 + ii, j, a, b, c);
    });
    __syncthreads();
#else
    if (threadIdx.x < TILE_Y && i0 + threadIdx.x < M) {
        const int ii = threadIdx.x, i = i0 + ii;
        REAL *row = d + ii * P;
#if SHARE_COEF
        REAL prev = row[0];
        for (int j = 1; j < N; ++j) {
            prev = row[j] - cf.ybeta[j * M + i] * prev;
            row[j] = prev;
        }
        prev *= cf.yinv[(N - 1) * M + i];
        row[N - 1] = prev;
        for (int j = N - 2; j >= 0; --j) {
            REAL a, b, c;
            row_y(cf, g, s, i, j, a, b, c);
            prev = (row[j] - c * prev) * cf.yinv[j * M + i];
            row[j] = prev;
        }
#else
        REAL *uu = sm + tile + ii * P, a, b, c, cprev, ucur;
        row_y(cf, g, s, i, 0, a, ucur, cprev);
        REAL prev = row[0];
        uu[0] = ucur;
        for (int j = 1; j < N; ++j) {
            row_y(cf, g, s, i, j, a, b, c);
            REAL beta = a / ucur;
            ucur = b - beta * cprev;
            cprev = c;
            uu[j] = ucur;
            prev = row[j] - beta * prev;
            row[j] = prev;
        }
        prev /= ucur;
        row[N - 1] = prev;
        for (int j = N - 2; j >= 0; --j) {
            row_y(cf, g, s, i, j, a, b, c);
            prev = (row[j] - c * prev) / uu[j];
            row[j] = prev;
        }
#endif
    }
    __syncthreads();
#endif
    for (int e = threadIdx.x; e < TILE_Y * N; e += blockDim.x) {
        int ii = e / N, j = e % N, i = i0 + ii;
        if (i < M) r[at(k, i, j, M, N)] = d[ii * P + j];
    }
}


// =====================================================================================================
// STRUCTURE 2: a warp per system, values in registers
// =====================================================================================================
#if STRUCTURE == 2
// A system of n <= 32 * EMAX rows is held by one warp: lane l keeps rows E*l .. E*l+E-1 (E = ceil(n/32)) in
// registers. With the LU factors precomputed (they do not depend on k, SPEC §2.6) both sweeps are
// first-order linear recurrences, y_p = d_p - beta_p*y_{p-1} and x_p = y_p*inv_p - gam_p*x_{p+1}: each lane
// composes its rows' affine maps, a 5-step shuffle scan composes the lanes', and each lane replays its rows
// from the carry it receives. No serial chain longer than E, and one read and one write of the data.
#define EMAX 8
#define FULL_MASK 0xffffffffu

__host__ __device__ __forceinline__ int rows_per_lane(int n) { return (n + 31) / 32; }

// Per time step (a slot of the batch of STEPS steps): VarX, VarY [M][N] and the factors of both directions
// (beta, 1/uu; and c/uu for y, which the x-kernel forms from VarX in its shared tile),
// lane-major: x-systems (column j, row i = E*l + q) at (q*N + j)*32 + l, y-systems (row i, column
// j = E*l + q) at (i*E + q)*32 + l, so a warp reads its rows' factors coalesced. Unused slots stay zero.
__host__ __device__ inline size_t warp_coef_slot(int M, int N) {
    return 2 * (size_t)M * N + 2 * (size_t)rows_per_lane(M) * 32 * N + 3 * (size_t)M * rows_per_lane(N) * 32;
}

__host__ __device__ inline Coef warp_coef_at(REAL *base, int slot, int M, int N) {
    REAL *p = base + (size_t)slot * warp_coef_slot(M, N);
    const size_t mn = (size_t)M * N, xs = (size_t)rows_per_lane(M) * 32 * N, ys = (size_t)M * rows_per_lane(N) * 32;
    Coef cf;
    cf.vx = p; cf.vy = p + mn;
    cf.xbeta = p + 2 * mn; cf.xinv = cf.xbeta + xs;
    cf.ybeta = cf.xinv + xs; cf.yinv = cf.ybeta + ys; cf.ygam = cf.yinv + ys;
    return cf;
}

// VarX and VarY of the steps it0 .. it0+gridDim.y-1 of the time loop (step it is g = T-2-it)
__global__ void warp_var_kernel(REAL *base, Grid g, const Step *steps, int T, int it0) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x, slot = blockIdx.y;
    if (e >= g.M * g.N) return;
    const Step s = steps[T - 2 - (it0 + slot)];
    Coef cf = warp_coef_at(base, slot, g.M, g.N);
    cf.vx[e] = var_x(g, s, e / g.N, e % g.N);
    cf.vy[e] = var_y(g, s, e / g.N, e % g.N);
}

// The LU factors of both directions for the same steps (reads the VarX, VarY that warp_var_kernel wrote)
__global__ void warp_factor_kernel(REAL *base, Grid g, const Step *steps, int T, int it0) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, slot = blockIdx.y, M = g.M, N = g.N;
    const Step s = steps[T - 2 - (it0 + slot)];
    const Coef cf = warp_coef_at(base, slot, M, N);
    if (t < N) {
        const int E = rows_per_lane(M);
        lu_factor(M, [&](int i, REAL &a, REAL &b, REAL &c) { row_x(cf, g, s, i, t, a, b, c); },
                  [&](int i, REAL beta, REAL inv, REAL) {
                      const size_t o = ((size_t)(i % E) * N + t) * 32 + i / E;
                      cf.xbeta[o] = beta; cf.xinv[o] = inv;
                  });
    } else if (t < N + M) {
        const int i = t - N, E = rows_per_lane(N);
        lu_factor(N, [&](int j, REAL &a, REAL &b, REAL &c) { row_y(cf, g, s, i, j, a, b, c); },
                  [&](int j, REAL beta, REAL inv, REAL c) {
                      const size_t o = ((size_t)i * E + j % E) * 32 + j / E;
                      cf.ybeta[o] = beta; cf.yinv[o] = inv; cf.ygam[o] = c * inv;
                  });
    }
}

// the factors beta and 1/uu of one system into the lane's registers; f(q) is the lane-major index of its row q
template <class Index>
__device__ __forceinline__ void load_factors(const REAL *beta, const REAL *inv, int E, Index f, REAL (&cb)[EMAX],
                                             REAL (&ci)[EMAX]) {
#pragma unroll
    for (int q = 0; q < EMAX; ++q) {
        cb[q] = REAL(0); ci[q] = REAL(0);
        if (q < E) { cb[q] = beta[f(q)]; ci[q] = inv[f(q)]; }
    }
}

// Solve the warp's system in place: v holds the right-hand side of the lane's rows, then the solution.
// Rows past n have beta = gam = 0 and v = 0, so they stay 0 and feed nothing back.
__device__ __forceinline__ void warp_solve(REAL (&v)[EMAX], const REAL (&cb)[EMAX], const REAL (&ci)[EMAX],
                                           const REAL (&cg)[EMAX], int E, int lane) {
    // forward: the lane's map y_in -> y_out is y_out = A*y_in + B
    REAL A = REAL(1), B = REAL(0);
#pragma unroll
    for (int q = 0; q < EMAX; ++q)
        if (q < E) { B = v[q] - cb[q] * B; A = -cb[q] * A; }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // inclusive scan: lane l ends with the maps of lanes 0..l composed
        REAL A2 = __shfl_up_sync(FULL_MASK, A, o), B2 = __shfl_up_sync(FULL_MASK, B, o);
        if (lane >= o) { B += A * B2; A *= A2; }
    }
    REAL y = __shfl_up_sync(FULL_MASK, B, 1);
    if (lane == 0) y = REAL(0);
#pragma unroll
    for (int q = 0; q < EMAX; ++q)
        if (q < E) { y = v[q] - cb[q] * y; v[q] = y; }
    // backward, from the last row up: x_out = A*x_in + B, x_in being the first row of the next lane
    A = REAL(1); B = REAL(0);
#pragma unroll
    for (int q = EMAX - 1; q >= 0; --q)
        if (q < E) { B = v[q] * ci[q] - cg[q] * B; A = -cg[q] * A; }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        REAL A2 = __shfl_down_sync(FULL_MASK, A, o), B2 = __shfl_down_sync(FULL_MASK, B, o);
        if (lane + o < 32) { B += A * B2; A *= A2; }
    }
    REAL x = __shfl_down_sync(FULL_MASK, B, 1);
    if (lane == 31) x = REAL(0);
#pragma unroll
    for (int q = EMAX - 1; q >= 0; --q)
        if (q < E) { x = v[q] * ci[q] - cg[q] * x; v[q] = x; }
}

// Implicit x with the explicit steps fused: block (j-tile of TILE_X columns, KPB planes k), a warp per
// column. Shared memory holds, for the block: VarX and VarY of the tile (read once, they do not depend on
// k); per plane: R's tile with a column of halo each side [M][TILE_X+2] (read coalesced) and the
// right-hand sides, then the solution. Tiles the warps read by column are skewed one slot per E rows, so
// those reads are free of bank conflicts. The factors beta and 1/uu of the warp's column stay in registers
// across the KPB planes, c/uu is formed from VarX. Out goes dtInv*Ux - 0.5*V, coalesced, into yr.
#define WX_THREADS (32 * TILE_X)
// XREGS: the x-kernel's register budget per thread; 0: 128 (at least 512 threads of it per SM, as before)
#define WX_MINB (XREGS == 0 ? 512 / WX_THREADS : 65536 / (XREGS * WX_THREADS) > 0 ? 65536 / (XREGS * WX_THREADS) : 1)
#if XFORM == 0
__global__ void __launch_bounds__(WX_THREADS, WX_MINB) warp_kernel_x(REAL *yr, const REAL *r, Coef cf, Grid g, Step s) {
    extern __shared__ unsigned char smem_raw[];
    const int M = g.M, N = g.N, W = TILE_X + 2, E = rows_per_lane(M), skewed = M * TILE_X + 32;
    REAL *rt = reinterpret_cast<REAL *>(smem_raw), *dt = rt + M * W, *vxt = dt + skewed, *vyt = vxt + skewed;
    const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, j0 = blockIdx.x * TILE_X, jj = tid % TILE_X;
    const bool solver = j0 + w < N;
    // the thread's elements (i, jj), i = 32q + tid / TILE_X, sit at slot i*TILE_X + jj + i/E of a skewed tile;
    // the warp's rows E*lane + q of column w at (E*lane + q)*TILE_X + w + lane
    int slot[EMAX];
    REAL cb[EMAX], ci[EMAX], cg[EMAX], v[EMAX];
#pragma unroll
    for (int q = 0; q < EMAX; ++q) {
        const int i = 32 * q + tid / TILE_X, j = j0 + jj;
        slot[q] = i * TILE_X + jj + i / E;
        if (q < E && i < M && j < N) {
            vxt[slot[q]] = cf.vx[i * N + j];
            vyt[slot[q]] = cf.vy[i * N + j];
        }
        cg[q] = REAL(0);
    }
    if (solver)
        load_factors(cf.xbeta, cf.xinv, E, [&](int q) { return ((size_t)q * N + j0 + w) * 32 + lane; }, cb, ci);
    __syncthreads();
    if (solver) {  // c_i / uu_i, with c_i = -0.5 * (0.5 * VarX * Dxx[i][2]) as in row_x (0 on the last row)
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {
            const int i = E * lane + q;
            if (q < E && i < M - 1) cg[q] = -REAL(0.5) * (REAL(0.5) * vxt[i * TILE_X + w + lane] * g.dxx[3 * i + 2]) * ci[q];
        }
    }
#pragma unroll 1
    for (int kk = 0; kk < KPB; ++kk) {
        const int k = blockIdx.y * KPB + kk;
        if (k >= g.K) break;
        for (int e = tid; e < M * W; e += WX_THREADS) {
            const int i = e / W, c = e % W, j = j0 - 1 + c;
            rt[e] = j >= 0 && j < N ? r[at(k, i, j, M, N)] : REAL(0);
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {
            const int i = 32 * q + tid / TILE_X, j = j0 + jj;
            if (q < E && i < M && j < N) {
                auto val = [&](int di, int dj) { return rt[(i + di) * W + jj + 1 + dj]; };
                dt[slot[q]] = explicit_x_v(g, s, vxt[slot[q]], i, val) + ly_v(g, vyt[slot[q]], j, val);
            }
        }
        __syncthreads();
        if (solver) {
#pragma unroll
            for (int q = 0; q < EMAX; ++q)
                v[q] = q < E && E * lane + q < M ? dt[(E * lane + q) * TILE_X + w + lane] : REAL(0);
            warp_solve(v, cb, ci, cg, E, lane);
#pragma unroll
            for (int q = 0; q < EMAX; ++q)
                if (q < E && E * lane + q < M) dt[(E * lane + q) * TILE_X + w + lane] = v[q];
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {
            const int i = 32 * q + tid / TILE_X, j = j0 + jj;
            if (q < E && i < M && j < N) {  // V again, from R's tile, which stays until the next plane
                auto val = [&](int di, int dj) { return rt[(i + di) * W + jj + 1 + dj]; };
                yr[at(k, i, j, M, N)] = s.dt_inv * dt[slot[q]] - REAL(0.5) * ly_v(g, vyt[slot[q]], j, val);
            }
        }
        __syncthreads();  // before the next plane overwrites R's tile
    }
}
#else
// XFORM 1-4: the same step rewritten so the x-stencil disappears. With A = dtInv*I - 0.5*Lx the x-system's
// matrix (the rows row_x builds), its right-hand side dtInv*R + 0.5*Lx R + V is 2*dtInv*R - A R + V, so
// U = A^-1 (2*dtInv*R + V) - R, and the y right-hand side dtInv*U - 0.5*V is dtInv*S + P with S the solution
// of A S = 2*dtInv*R + V and P = -(dtInv*R + 0.5*V). Per element and plane the explicit pass reads R and its
// j-neighbours from the tile (V = Ly R) and keeps P in a register for the output pass, which reads only S.
// R's tile rows are padded (warp_rt_stride) so a warp's reads are free of bank conflicts; VarY of the
// thread's elements (k-invariant) comes from a shared tile (XFORM 1) or stays in registers (XFORM 2); XFORM 3
// keeps both VarY and P in shared tiles (no spills at 128 registers); XFORM 4 is 3 with the next plane's R
// tile copied asynchronously (cp.async) while the current plane is solved and written out, as R's tile is
// free once the explicit pass has read it. c/uu of the warp's column is formed from VarX read once from
// global memory.
#define WX_P_SHARED (XFORM == 3 || XFORM == 4)
// one element of R's tile, copied asynchronously (zero-filled outside the grid); the thread waits for its own
// copies before the barrier that makes them the block's
__device__ __forceinline__ void copy_async(REAL *dst, const REAL *src, bool in) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"((int)sizeof(REAL)),
                 "r"(in ? (int)sizeof(REAL) : 0)
                 : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__host__ __device__ inline int warp_rt_stride() {
    // a wavefront of 128 bytes serves 128/sizeof(REAL) threads: TILE_X columns of 128/sizeof(REAL)/TILE_X rows,
    // whose rows start on distinct multiples of TILE_X (mod the banks) when the stride is an odd multiple of it
    const int W = TILE_X + 2, n = 128 / (int)sizeof(REAL);
    if (TILE_X >= n) return W;
    int ws = W;
    while (ws % (2 * TILE_X) != TILE_X) ++ws;
    return ws;
}

__global__ void __launch_bounds__(WX_THREADS, WX_MINB) warp_kernel_x(REAL *yr, const REAL *r, Coef cf, Grid g, Step s) {
    extern __shared__ unsigned char smem_raw[];
    const int M = g.M, N = g.N, W = TILE_X + 2, WS = warp_rt_stride(), E = rows_per_lane(M);
    [[maybe_unused]] const int skewed = M * TILE_X + 32;
    REAL *rt = reinterpret_cast<REAL *>(smem_raw), *dt = rt + M * WS;
    const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, j0 = blockIdx.x * TILE_X, jj = tid % TILE_X;
    const int j = j0 + jj;
    const bool solver = j0 + w < N;
    // the y-weights' Dyy factors of the thread's column (j is the same for all its elements)
    REAL h0 = REAL(0), h1 = REAL(0), h2 = REAL(0);
    if (j < N) {
        if (j > 0) h0 = REAL(0.5) * g.dyy[3 * j];
        h1 = REAL(0.5) * g.dyy[3 * j + 1];
        if (j < N - 1) h2 = REAL(0.5) * g.dyy[3 * j + 2];
    }
    // the thread's elements (i, jj), i = 32q + tid / TILE_X, sit at slot i*TILE_X + jj + i/E of the skewed tile;
    // the warp's rows E*lane + q of column w at (E*lane + q)*TILE_X + w + lane
    auto slot = [&](int q) { const int i = 32 * q + tid / TILE_X; return i * TILE_X + jj + i / E; };
    REAL cb[EMAX], ci[EMAX], cg[EMAX], v[EMAX];
#if !WX_P_SHARED
    REAL p[EMAX];
#else
    REAL *pt = dt + skewed;  // P, in the thread's slots
#endif
#if XFORM == 2
    REAL vy[EMAX];
#else
    REAL *vyt = dt + (WX_P_SHARED ? 2 : 1) * skewed;
#endif
#pragma unroll
    for (int q = 0; q < EMAX; ++q) {
        const int i = 32 * q + tid / TILE_X;
#if XFORM == 2
        vy[q] = q < E && i < M && j < N ? cf.vy[i * N + j] : REAL(0);
#else
        if (q < E && i < M && j < N) vyt[slot(q)] = cf.vy[i * N + j];
#endif
        cg[q] = REAL(0);
#if !WX_P_SHARED
        p[q] = REAL(0);
#endif
    }
    if (solver) {  // c_i / uu_i, with c_i = -0.5 * (0.5 * VarX * Dxx[i][2]) as in row_x (0 on the last row)
        load_factors(cf.xbeta, cf.xinv, E, [&](int q) { return ((size_t)q * N + j0 + w) * 32 + lane; }, cb, ci);
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {
            const int i = E * lane + q;
            if (q < E && i < M - 1) cg[q] = -REAL(0.5) * (REAL(0.5) * cf.vx[i * N + j0 + w] * g.dxx[3 * i + 2]) * ci[q];
        }
    }
    // R's tile of the first plane; later planes' are loaded after the previous output pass (R's tile is last
    // read by the explicit pass, two barriers before)
    auto load_tile = [&](int k) {
        for (int e = tid; e < M * W; e += WX_THREADS) {
            const int i = e / W, c = e % W, jc = j0 - 1 + c;
#if XFORM == 4
            const bool in = jc >= 0 && jc < N;
            copy_async(rt + i * WS + c, in ? r + at(k, i, jc, M, N) : r, in);
#else
            rt[i * WS + c] = jc >= 0 && jc < N ? r[at(k, i, jc, M, N)] : REAL(0);
#endif
        }
#if XFORM == 4
        copy_async_commit();
#endif
    };
    const int k0 = blockIdx.y * KPB;
    load_tile(k0);
#if XFORM == 4
    copy_async_wait();
#endif
#pragma unroll 1
    for (int kk = 0; kk < KPB; ++kk) {
        const int k = k0 + kk;
        if (k >= g.K) break;
        __syncthreads();
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {
            const int i = 32 * q + tid / TILE_X;
            if (q < E && i < M && j < N) {
                const REAL *c = rt + i * WS + jj + 1;
#if XFORM == 2
                const REAL y = vy[q];
#else
                const REAL y = vyt[slot(q)];
#endif
                const REAL rc = c[0];
                REAL V = (y * h1) * rc;
                V += (y * h0) * c[-1];
                V += (y * h2) * c[1];
                dt[slot(q)] = REAL(2) * s.dt_inv * rc + V;
#if WX_P_SHARED
                pt[slot(q)] = -(s.dt_inv * rc + REAL(0.5) * V);
#else
                p[q] = -(s.dt_inv * rc + REAL(0.5) * V);
#endif
            }
        }
        __syncthreads();
#if XFORM == 4
        if (kk + 1 < KPB && k + 1 < g.K) load_tile(k + 1);  // R's tile was last read by the explicit pass
#endif
        if (solver) {
#pragma unroll
            for (int q = 0; q < EMAX; ++q)
                v[q] = q < E && E * lane + q < M ? dt[(E * lane + q) * TILE_X + w + lane] : REAL(0);
            warp_solve(v, cb, ci, cg, E, lane);
#pragma unroll
            for (int q = 0; q < EMAX; ++q)
                if (q < E && E * lane + q < M) dt[(E * lane + q) * TILE_X + w + lane] = v[q];
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < EMAX; ++q) {  // the thread's own slots: the next explicit pass rewrites them itself
            const int i = 32 * q + tid / TILE_X;
#if WX_P_SHARED
            if (q < E && i < M && j < N) yr[at(k, i, j, M, N)] = s.dt_inv * dt[slot(q)] + pt[slot(q)];
#else
            if (q < E && i < M && j < N) yr[at(k, i, j, M, N)] = s.dt_inv * dt[slot(q)] + p[q];
#endif
        }
#if XFORM == 4
        copy_async_wait();
#else
        if (kk + 1 < KPB && k + 1 < g.K) load_tile(k + 1);
#endif
    }
}
#endif

// Implicit y: block (TILE_Y rows, KPB planes), a warp per row, working alone (no block barrier): the row
// read coalesced into the warp's shared-memory row (skewed by `pad` slots per E values against bank
// conflicts), solved in registers, written back to R coalesced.
#define WY_THREADS (32 * TILE_Y)
__host__ __device__ inline int warp_row_pad(int E) { return E % 2 ? 2 : 1; }
__host__ __device__ inline int warp_row_len(int N) {
    return 32 * rows_per_lane(N) + 31 * warp_row_pad(rows_per_lane(N)) + 1;
}

__global__ void __launch_bounds__(WY_THREADS, 512 / WY_THREADS) warp_kernel_y(REAL *r, const REAL *yr, Coef cf, Grid g) {
    extern __shared__ unsigned char smem_raw[];
    const int M = g.M, N = g.N, E = rows_per_lane(N), pad = warp_row_pad(E);
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, i = blockIdx.x * TILE_Y + w;
    if (i >= M) return;  // the whole warp
    REAL *row = reinterpret_cast<REAL *>(smem_raw) + w * warp_row_len(N);
    // value j sits at j + (j/E)*pad: the lane's coalesced values j = lane + 32q, and its own rows E*lane + q
    int slot[EMAX];
#pragma unroll
    for (int q = 0; q < EMAX; ++q) slot[q] = lane + 32 * q + (lane + 32 * q) / E * pad;
    const int own = lane * (E + pad);
    REAL cb[EMAX], ci[EMAX], cg[EMAX], v[EMAX];
    auto f = [&](int q) { return ((size_t)i * E + q) * 32 + lane; };
    load_factors(cf.ybeta, cf.yinv, E, f, cb, ci);
#pragma unroll
    for (int q = 0; q < EMAX; ++q) cg[q] = q < E ? cf.ygam[f(q)] : REAL(0);
#pragma unroll 1
    for (int kk = 0; kk < KPB; ++kk) {
        const int k = blockIdx.y * KPB + kk;
        if (k >= g.K) break;
        const size_t base = at(k, i, 0, M, N);
#pragma unroll
        for (int q = 0; q < EMAX; ++q)
            if (lane + 32 * q < N) row[slot[q]] = yr[base + lane + 32 * q];
        __syncwarp();
#pragma unroll
        for (int q = 0; q < EMAX; ++q) v[q] = q < E && E * lane + q < N ? row[own + q] : REAL(0);
        warp_solve(v, cb, ci, cg, E, lane);
#pragma unroll
        for (int q = 0; q < EMAX; ++q)
            if (q < E && E * lane + q < N) row[own + q] = v[q];
        __syncwarp();
#pragma unroll
        for (int q = 0; q < EMAX; ++q)
            if (lane + 32 * q < N) r[base + lane + 32 * q] = row[slot[q]];
        __syncwarp();
    }
}

#if XFORM == 0
static size_t warp_shared_x(int M) { return ((size_t)M * (TILE_X + 2) + 3 * ((size_t)M * TILE_X + 32)) * sizeof(REAL); }
#else
static size_t warp_shared_x(int M) {
    // R's tile; S; VarY (XFORM 1, 3, 4); P (XFORM 3, 4)
    return ((size_t)M * warp_rt_stride() + (XFORM == 2 ? 1 : XFORM == 1 ? 2 : 3) * ((size_t)M * TILE_X + 32)) * sizeof(REAL);
}
#endif
static size_t warp_shared_y(int N) { return (size_t)TILE_Y * warp_row_len(N) * sizeof(REAL); }
#endif

// =====================================================================================================
// host
// =====================================================================================================
#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t err_ = (call);                                                                    \
        if (err_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "locvolcalib: %s failed: %s\n", #call, cudaGetErrorString(err_));         \
            status = -1.0f;                                                                           \
            goto done;                                                                                \
        }                                                                                             \
    } while (0)

static unsigned blocks_for(size_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

[[maybe_unused]] static size_t shared_x(int M) {
    size_t tile = (size_t)M * (TILE_X + 1), red = (size_t)TILE_X * 2 * segments(M) * 4;
    return (SOLVER_X == 1 ? 4 * tile : SOLVER_X == 2 ? tile + red : (SHARE_COEF ? 1 : 2) * tile) * sizeof(REAL);
}

[[maybe_unused]] static size_t shared_y(int N) {
    size_t tile = (size_t)TILE_Y * (N + 1), red = (size_t)TILE_Y * 2 * segments(N) * 4;
    return (SOLVER_Y == 1 ? 4 * tile : SOLVER_Y == 2 ? tile + red : (SHARE_COEF ? 1 : 2) * tile) * sizeof(REAL);
}

// res[K]: the prices. params: s0, t, alpha, nu, beta (double). variant 1: Finpar, 2: course.
// Returns the time of the whole computation in ms, or a negative value on an error (said on stderr).
extern "C" float locvolcalib(REAL *res, const double *params, int K, int M, int N, int T, int variant) {
    float status = 0.0f, ms = 0.0f;
    const double s0 = params[0], t = params[1], alpha = params[2], nu = params[3], beta = params[4];
    const size_t total = (size_t)K * M * N;
    std::vector<double> tl(T > 0 ? T : 1), x(M > 0 ? M : 1), y(N > 0 ? N : 1);
    std::vector<REAL> h_lnx(M > 0 ? M : 1), h_y(N > 0 ? N : 1), h_x(M > 0 ? M : 1), h_dxx(3 * (M > 0 ? M : 1), REAL(0)),
        h_dyy(3 * (N > 0 ? N : 1), REAL(0));
    REAL *d_x = nullptr, *d_lnx = nullptr, *d_y = nullptr, *d_dxx = nullptr, *d_dyy = nullptr, *d_res = nullptr;
    REAL *d_r = nullptr, *d_work = nullptr, *d_coef = nullptr;
    Step *d_steps = nullptr;
    std::vector<Step> h_steps(T > 1 ? T - 1 : 1);
    cudaEvent_t start = nullptr, stop = nullptr;
    Grid g;
    [[maybe_unused]] Coef cf = {};
    int ind_x = 0, ind_y = N / 2;
    if (K < 1 || K > 65535 || M < 2 || N < 2 || T < 2) {
        fprintf(stderr, "locvolcalib: impossible size K=%d M=%d N=%d T=%d\n", K, M, N, T);
        return -1.0f;
    }
    {   // initGrid and initOperator (SPEC §2.1-2.2), on the host in double; O(M + N + T)
        for (int i = 0; i < T; ++i) tl[i] = (t * i) / (T - 1);
        double dx = (20.0 * alpha * s0 * sqrt(t)) / M;
        ind_x = (int)(s0 / dx);
        for (int i = 0; i < M; ++i) x[i] = (i * dx - ind_x * dx) + s0;
        double dy = (10.0 * nu * sqrt(t)) / N;
        for (int j = 0; j < N; ++j) y[j] = j * dy - ind_y * dy + log(alpha);
        for (int i = 0; i < M; ++i) { h_x[i] = (REAL)x[i]; h_lnx[i] = (REAL)log(x[i]); }
        for (int j = 0; j < N; ++j) h_y[j] = (REAL)y[j];
        const std::vector<double> *zs[2] = {&x, &y};
        std::vector<REAL> *dds[2] = {&h_dxx, &h_dyy};
        for (int w = 0; w < 2; ++w) {
            const std::vector<double> &z = *zs[w];
            for (size_t r = 1; r + 1 < z.size(); ++r) {
                double dl = z[r] - z[r - 1], du = z[r + 1] - z[r];
                (*dds[w])[3 * r] = (REAL)(2.0 / dl / (dl + du));
                (*dds[w])[3 * r + 1] = (REAL)(-2.0 * (1.0 / dl + 1.0 / du) / (dl + du));
                (*dds[w])[3 * r + 2] = (REAL)(2.0 / du / (dl + du));
            }
        }
    }
    g.K = K; g.M = M; g.N = N; g.course = variant == 2;
    g.beta = (REAL)beta; g.alpha = (REAL)alpha; g.nunu = (REAL)(nu * nu);
    CHECK(cudaMalloc(&d_x, M * sizeof(REAL)));
    CHECK(cudaMalloc(&d_lnx, M * sizeof(REAL)));
    CHECK(cudaMalloc(&d_y, N * sizeof(REAL)));
    CHECK(cudaMalloc(&d_dxx, 3 * M * sizeof(REAL)));
    CHECK(cudaMalloc(&d_dyy, 3 * N * sizeof(REAL)));
    CHECK(cudaMalloc(&d_res, K * sizeof(REAL)));
    CHECK(cudaMalloc(&d_r, total * sizeof(REAL)));
    CHECK(cudaMemcpy(d_x, h_x.data(), M * sizeof(REAL), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_lnx, h_lnx.data(), M * sizeof(REAL), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_y, h_y.data(), N * sizeof(REAL), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_dxx, h_dxx.data(), 3 * M * sizeof(REAL), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_dyy, h_dyy.data(), 3 * N * sizeof(REAL), cudaMemcpyHostToDevice));
    g.lnx = d_lnx; g.y = d_y; g.dxx = d_dxx; g.dyy = d_dyy;
#if STRUCTURE == 0
    CHECK(cudaMalloc(&d_work, 9 * total * sizeof(REAL)));  // VarX VarY U V a b c y uu
#elif STRUCTURE == 2
    if (M > 32 * EMAX || N > 32 * EMAX) {
        fprintf(stderr, "locvolcalib: the warp solver holds systems of at most %d rows, not %d x %d\n", 32 * EMAX, M, N);
        status = -1.0f;
        goto done;
    }
    CHECK(cudaMalloc(&d_work, total * sizeof(REAL)));  // the y right-hand side
    CHECK(cudaMalloc(&d_coef, STEPS * warp_coef_slot(M, N) * sizeof(REAL)));
    CHECK(cudaMemset(d_coef, 0, STEPS * warp_coef_slot(M, N) * sizeof(REAL)));  // the factors' padding rows
    for (int gi = 0; gi < T - 1; ++gi) {
        h_steps[gi].dt_inv = (REAL)(1.0 / (tl[gi + 1] - tl[gi]));
        h_steps[gi].drift = (REAL)(0.5 * nu * nu * tl[gi]);
    }
    CHECK(cudaMalloc(&d_steps, (T - 1) * sizeof(Step)));
    CHECK(cudaMemcpy(d_steps, h_steps.data(), (T - 1) * sizeof(Step), cudaMemcpyHostToDevice));
    {
        int optin = 0;
        CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
        if (warp_shared_x(M) > (size_t)optin || warp_shared_y(N) > (size_t)optin) {
            fprintf(stderr, "locvolcalib: the tiles need %zu and %zu bytes of shared memory, the GPU has %d\n",
                    warp_shared_x(M), warp_shared_y(N), optin);
            status = -1.0f;
            goto done;
        }
        CHECK(cudaFuncSetAttribute(warp_kernel_x, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)warp_shared_x(M)));
        CHECK(cudaFuncSetAttribute(warp_kernel_y, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)warp_shared_y(N)));
    }
#else
    CHECK(cudaMalloc(&d_work, (FUSE_EXPLICIT ? 1 : 3) * total * sizeof(REAL)));  // y rhs (+ U, V)
    if (SHARE_COEF) {
        CHECK(cudaMalloc(&d_coef, 6 * (size_t)M * N * sizeof(REAL)));
        REAL **slots[6] = {&cf.vx, &cf.vy, &cf.xbeta, &cf.xinv, &cf.ybeta, &cf.yinv};
        for (int q = 0; q < 6; ++q) *slots[q] = d_coef + (size_t)q * M * N;
    }
    {
        int optin = 0;
        CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
        if (threads_x(M) > BOUNDS_X || threads_y(N) > BOUNDS_Y) {
            fprintf(stderr, "locvolcalib: the partitioned solver needs %d and %d threads per block, at most %d\n",
                    threads_x(M), threads_y(N), 512);
            status = -1.0f;
            goto done;
        }
        if (shared_x(M) > (size_t)optin || shared_y(N) > (size_t)optin) {
            fprintf(stderr, "locvolcalib: the tiles need %zu and %zu bytes of shared memory, the GPU has %d\n",
                    shared_x(M), shared_y(N), optin);
            status = -1.0f;
            goto done;
        }
        CHECK(cudaFuncSetAttribute(kernel_x, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared_x(M)));
        CHECK(cudaFuncSetAttribute(kernel_y, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared_y(N)));
    }
#endif
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(start));
    payoff_kernel<<<blocks_for(total, 256), 256>>>(d_r, d_x, K, M, N);
    for (int gi = T - 2; gi >= 0; --gi) {
#if STRUCTURE == 2
        const int it = T - 2 - gi, slot = it % STEPS;
        if (slot == 0) {  // the coefficients and factors of the next STEPS steps (fewer at the end)
            const unsigned nb = (unsigned)(T - 1 - it < STEPS ? T - 1 - it : STEPS);
            warp_var_kernel<<<dim3(blocks_for((size_t)M * N, 256), nb), 256>>>(d_coef, g, d_steps, T, it);
            warp_factor_kernel<<<dim3(blocks_for((size_t)M + N, 64), nb), 64>>>(d_coef, g, d_steps, T, it);
        }
        const Coef wc = warp_coef_at(d_coef, slot, M, N);
        const unsigned kb = (unsigned)((K + KPB - 1) / KPB);
        warp_kernel_x<<<dim3((N + TILE_X - 1) / TILE_X, kb), WX_THREADS, warp_shared_x(M)>>>(d_work, d_r, wc, g, h_steps[gi]);
        warp_kernel_y<<<dim3((M + TILE_Y - 1) / TILE_Y, kb), WY_THREADS, warp_shared_y(N)>>>(d_r, d_work, wc, g);
#else
        Step s;
        s.dt_inv = (REAL)(1.0 / (tl[gi + 1] - tl[gi]));
        s.drift = (REAL)(0.5 * nu * nu * tl[gi]);
#if STRUCTURE == 0
        REAL *varx = d_work, *vary = d_work + total, *u = d_work + 2 * total, *v = d_work + 3 * total;
        REAL *a = d_work + 4 * total, *b = d_work + 5 * total, *c = d_work + 6 * total, *yv = d_work + 7 * total;
        REAL *uu = d_work + 8 * total;
        unsigned nb = blocks_for(total, BLOCK);
        naive_update_params<<<nb, BLOCK>>>(varx, vary, g, s);
        naive_explicit_x<<<nb, BLOCK>>>(u, d_r, varx, g, s);
        naive_explicit_y<<<nb, BLOCK>>>(u, v, d_r, vary, g);
        naive_coef_x<<<nb, BLOCK>>>(a, b, c, varx, g, s);
        naive_tridag<<<blocks_for((size_t)K * N, BLOCK), BLOCK>>>(a, b, c, u, u, uu, M, K * N);
        naive_coef_y<<<nb, BLOCK>>>(a, b, c, yv, u, v, vary, g, s);
        naive_tridag<<<blocks_for((size_t)K * M, BLOCK), BLOCK>>>(a, b, c, yv, d_r, uu, N, K * M);
#else
        REAL *yr = d_work, *u = FUSE_EXPLICIT ? nullptr : d_work + total, *v = FUSE_EXPLICIT ? nullptr : d_work + 2 * total;
        if (SHARE_COEF) {
            coef_kernel<<<blocks_for((size_t)M * N, 256), 256>>>(cf, g, s);
            if (SOLVER_X == 0 || SOLVER_Y == 0) factor_kernel<<<blocks_for((size_t)M + N, 64), 64>>>(cf, g, s);
        }
        if (!FUSE_EXPLICIT) explicit_kernel<<<blocks_for(total, BLOCK), BLOCK>>>(u, v, d_r, cf, g, s);
        kernel_x<<<dim3((N + TILE_X - 1) / TILE_X, K), threads_x(M), shared_x(M)>>>(yr, d_r, u, v, cf, g, s);
        kernel_y<<<dim3((M + TILE_Y - 1) / TILE_Y, K), threads_y(N), shared_y(N)>>>(d_r, yr, cf, g, s);
#endif
#endif
    }
    gather_kernel<<<blocks_for(K, 128), 128>>>(d_res, d_r, K, M, N, ind_x, ind_y);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    CHECK(cudaMemcpy(res, d_res, K * sizeof(REAL), cudaMemcpyDeviceToHost));
    status = ms;
done:
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    REAL *bufs[] = {d_x, d_lnx, d_y, d_dxx, d_dyy, d_res, d_r, d_work, d_coef};
    for (REAL *p : bufs)
        if (p) cudaFree(p);
    if (d_steps) cudaFree(d_steps);
    return status;
}
