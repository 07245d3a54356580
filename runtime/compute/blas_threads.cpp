#include "runtime/compute/blas_threads.h"

#include <cblas.h>

namespace parlab::compute {

void pin_blas_to_one_thread() { openblas_set_num_threads(1); }

}  // namespace parlab::compute
