// saxpy: y = a * x + y over n elements of type T: the example workload of `tuner init`.
//
// Kernel Tuner puts `#define name value` in front of this file for every tunable parameter of the config
// it compiles (block_size_x, WPT), and the tuner adds the dtype's defines (T: float or double, from the
// space's `dtypes`). The #ifndef defaults below only make the file compile on its own.
//
// Launch: 1-D blocks of block_size_x threads; a 1-D grid of ceil(n / (block_size_x * WPT)) blocks, so each
// block covers block_size_x * WPT consecutive elements.

#ifndef T
#define T float
#endif
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef WPT
#define WPT 1  // work per thread: elements each thread computes
#endif

extern "C" __global__ void saxpy(int n, T a, const T *__restrict__ x, T *__restrict__ y) {
    // thread t of a block takes elements t, t + block_size_x, t + 2 * block_size_x, ...: at every step the
    // threads of a warp touch consecutive addresses, so the loads and stores stay coalesced
    const long long first = (long long)blockIdx.x * block_size_x * WPT + threadIdx.x;
#pragma unroll
    for (int k = 0; k < WPT; k++) {
        const long long i = first + (long long)k * block_size_x;
        if (i < n) {
            y[i] = a * x[i] + y[i];
        }
    }
}
