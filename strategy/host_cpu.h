#pragma once
// What this machine's CPU offers the choices made before any run (the runtime's own checks,
// runtime/compute/cpu/matmul.h, stay the authority on what it can run).

namespace parlab::strategy {

// Whether this build and CPU multiply in bf16 (oneDNN and AVX512-BF16, as the CPU runtime's mixed
// precision needs): what an MLP whose TOML names no precision trains in (io.cpp). False under
// PARLAB_CPU_BF16=off, to see another machine's default here.
bool host_multiplies_bf16();

}  // namespace parlab::strategy
