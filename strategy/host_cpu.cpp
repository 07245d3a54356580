#include "strategy/host_cpu.h"

#include <cstdlib>
#include <string_view>

namespace parlab::strategy {

bool host_multiplies_bf16() {
  if (const char* v = std::getenv("PARLAB_CPU_BF16"); v != nullptr && std::string_view(v) == "off") return false;
#if defined(PARLAB_HAVE_DNNL) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

}  // namespace parlab::strategy
