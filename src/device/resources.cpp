#include "nj/device/resources.hpp"

namespace nj {

Resources make_cpu_resources(std::int64_t budget_bytes, int threads) {
  Resources r;
  r.device = make_cpu_device(budget_bytes);
  r.backend = make_checked_backend(make_cpu_backend(threads), *r.device);
  return r;
}

}  // namespace nj
