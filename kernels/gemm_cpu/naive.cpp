// The naive OpenMP matrix multiplication, the baseline of gemm-cpu: seed 004's naive i-j-k loop (B read
// down its columns) with A's rows split over all the CPUs' threads. Same interface and timing as gemm_cpu.cpp.
#include <omp.h>

#ifndef T
#define T float
#endif

extern "C" float gemm_naive(const T *A, const T *B, T *C, int M, int N, int K) {
    const double start = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < M; ++i)
        for (long j = 0; j < N; ++j) {
            T sum = 0;
            for (long k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
        }
    return (float)((omp_get_wtime() - start) * 1e3);
}
