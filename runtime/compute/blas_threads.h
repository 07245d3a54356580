#pragma once
// One BLAS thread per rank. Ranks are processes (or threads in tests) that already fill the cores;
// OpenBLAS's own thread pool would oversubscribe them and make reductions order-dependent.

namespace parlab::compute {

// Pins OpenBLAS to a single thread. Call once where compute starts (model construction calls it);
// calling it again is harmless.
void pin_blas_to_one_thread();

}  // namespace parlab::compute
