#pragma once
// Two independent pieces of work on two of OpenMP's threads (one after the other where the process may use only
// one: --threads 1, OMP_NUM_THREADS=1, or inside another parallel region).
#include <omp.h>

#include <exception>

namespace nj {

// Runs first() and second() at once; when both have finished, rethrows first's error, else second's, as running
// them in order would have (no exception leaves an OpenMP region).
template <class First, class Second>
void side_by_side(First&& first, Second&& second) {
  std::exception_ptr errors[2];
  const auto guarded = [&errors](int k, auto& work) {
    try {
      work();
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
#pragma omp parallel sections num_threads(omp_get_max_threads() > 1 ? 2 : 1)
  {
#pragma omp section
    guarded(0, first);
#pragma omp section
    guarded(1, second);
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace nj
