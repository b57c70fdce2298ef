"""The numpy reference of LocVolCalib (SPEC §2-3): the ADI solver, vectorised over the outer dimension.

Everything except the payoff is the same for every strike k (SPEC §2.6), so the tridiagonal factors of a
time step are computed once, in the same operations the per-k original does; the sweeps then run over all
K systems at once. The loops along the solve axis stay sequential, as Thomas's algorithm is."""

from __future__ import annotations

import numpy as np

from tuner.workloads.locvolcalib_io import Problem


def init_grid(p: Problem, dtype: type[np.floating] = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """timeline[T], X[M], Y[N] and the indices of (s0, ln alpha), evaluated in REAL (SPEC §2.1)."""
    R = np.dtype(dtype).type
    s0, t, alpha, nu = R(p.s0), R(p.t), R(p.alpha), R(p.nu)
    timeline = (t * np.arange(p.num_t, dtype=dtype)) / R(p.num_t - 1)
    dx = (R(20) * alpha * s0 * np.sqrt(t)) / R(p.num_x)
    ind_x = int(s0 / dx)
    x = (np.arange(p.num_x, dtype=dtype) * dx - R(ind_x) * dx) + s0
    dy = (R(10) * nu * np.sqrt(t)) / R(p.num_y)
    ind_y = p.num_y // 2
    y = np.arange(p.num_y, dtype=dtype) * dy - R(ind_y) * dy + np.log(alpha)
    return timeline, x, y, ind_x, ind_y


def second_derivative(z: np.ndarray) -> np.ndarray:
    """DD[n][3] of initOperator (SPEC §2.2): lower, centre, upper weights; boundary rows zero."""
    dd = np.zeros((z.size, 3), dtype=z.dtype)
    dl = z[1:-1] - z[:-2]
    du = z[2:] - z[1:-1]
    two = z.dtype.type(2)
    dd[1:-1, 0] = two / dl / (dl + du)
    dd[1:-1, 1] = -two * (1 / dl + 1 / du) / (dl + du)
    dd[1:-1, 2] = two / du / (dl + du)
    return dd


def thomas_factors(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(beta, uu) of the forward sweep along axis 0 (SPEC §3), for a batch of systems in the other axis."""
    n = a.shape[0]
    beta, uu = np.zeros_like(a), np.empty_like(b)
    uu[0] = b[0]
    for i in range(1, n):
        beta[i] = a[i] / uu[i - 1]
        uu[i] = b[i] - beta[i] * c[i - 1]
    return beta, uu


def thomas_solve(u: np.ndarray, beta: np.ndarray, uu: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Solve in place along axis 0 of u[n, K, L], the factors [n, L] shared by the K batches."""
    n = u.shape[0]
    for i in range(1, n):
        u[i] -= beta[i] * u[i - 1]
    u[n - 1] /= uu[n - 1]
    for i in range(n - 2, -1, -1):
        u[i] = (u[i] - c[i] * u[i + 1]) / uu[i]
    return u


def price(p: Problem, dtype: type[np.floating] = np.float64) -> np.ndarray:
    """res[k] = R_k[indX][indY] after the T-1 backward steps, for the K strikes 0.001*k.

    The value array is held as R[i][k][j] (and transposed to [j][k][i] for the y-solves), so that every
    step of a sweep works on one contiguous K x L slab."""
    R = np.dtype(dtype).type
    half = R(0.5)
    timeline, x, y, ind_x, ind_y = init_grid(p, dtype)
    dxx, dyy = second_derivative(x), second_derivative(y)
    log_x = np.log(x)
    nu, alpha, beta = R(p.nu), R(p.alpha), R(p.beta)
    strikes = R(0.001) * np.arange(p.outer, dtype=dtype)
    # R[i][k][j]: the payoff max(X[i] - strike_k, 0) for every j
    res = np.maximum(x[:, None] - strikes[None, :], R(0))[:, :, None].repeat(p.num_y, axis=2)
    for g in range(p.num_t - 2, -1, -1):
        drift = half * nu * nu * timeline[g]
        var_x = np.exp(R(2) * (beta * log_x[:, None] + y[None, :] - drift))
        if p.variant == "finpar":
            var_y = np.full_like(var_x, nu * nu)
        else:
            var_y = np.exp(R(2) * (alpha * log_x[:, None] + y[None, :] - drift))
        dt_inv = R(1) / (timeline[g + 1] - timeline[g])
        ax = [(half * var_x * dxx[:, m, None])[:, None, :] for m in range(3)]  # [M][1][N]: broadcast over k
        ay = [(half * var_y * dyy[None, :, m])[:, None, :] for m in range(3)]
        # explicit x, in the original's order: dtInv*R, then the i-1, i, i+1 terms, each times 0.5
        u = dt_inv * res
        u[1:] += half * ax[0][1:] * res[:-1]
        u += half * ax[1] * res
        u[:-1] += half * ax[2][:-1] * res[1:]
        # explicit y
        v = np.zeros_like(res)
        v[:, :, 1:] += ay[0][:, :, 1:] * res[:, :, :-1]
        v += ay[1] * res
        v[:, :, :-1] += ay[2][:, :, :-1] * res[:, :, 1:]
        u += v
        # implicit x: systems along i, one per (k, j); the factors [M][N] are the same for every k
        a, b, c = (-half * ax[0])[:, 0], (dt_inv - half * ax[1])[:, 0], (-half * ax[2])[:, 0]
        bx, uux = thomas_factors(a, b, c)
        thomas_solve(u, bx, uux, c)
        # implicit y: systems along j, one per (k, i); solved on [j][k][i]
        a, b, c = (-half * ay[0])[:, 0].T, (dt_inv - half * ay[1])[:, 0].T, (-half * ay[2])[:, 0].T
        by, uuy = thomas_factors(a, b, c)
        rhs = np.ascontiguousarray((dt_inv * u - half * v).transpose(2, 1, 0))
        res = np.ascontiguousarray(thomas_solve(rhs, by, uuy, c).transpose(2, 1, 0))
    return res[ind_x, :, ind_y].copy()
