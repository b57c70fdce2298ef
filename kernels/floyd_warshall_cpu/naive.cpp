// The naive OpenMP Floyd-Warshall, the baseline of floyd-warshall-cpu: the textbook triple loop on the
// row-major matrix, rows of each pivot's step split over all the CPUs' threads (what seed 000 started
// from before blocking). Same interface and timing as fw_cpu.cpp: returns the time of the n steps in ms.
#include <omp.h>

#define FW_INF 1073741823

extern "C" float floyd_warshall_naive(const int *edges, int *dist, int n, int m) {
    for (long i = 0; i < (long)n * n; ++i) dist[i] = FW_INF;
    for (long i = 0; i < n; ++i) dist[i * n + i] = 0;
    for (int e = 0; e < m; ++e) {
        const int u = edges[3 * e], v = edges[3 * e + 1], w = edges[3 * e + 2];
        if (u != v && w < dist[(long)u * n + v]) dist[(long)u * n + v] = w;
    }
    const double start = omp_get_wtime();
#pragma omp parallel
    for (long k = 0; k < n; ++k) {
        const int *dk = dist + k * n;  // row k does not change in step k (d[k][k] = 0)
#pragma omp for schedule(static)
        for (long i = 0; i < n; ++i) {
            int *di = dist + i * n;
            const int dik = di[k];
            for (long j = 0; j < n; ++j)
                if (dik + dk[j] < di[j]) di[j] = dik + dk[j];
        }
    }
    return (float)((omp_get_wtime() - start) * 1e3);
}
