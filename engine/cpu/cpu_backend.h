// The CPU backend: OpenBLAS for the GEMMs, OpenMP loops over the shared op
// math (engine/backend/op_math.h) for everything else. Runs everywhere.
#ifndef SEQBOAT_ENGINE_CPU_CPU_BACKEND_H_
#define SEQBOAT_ENGINE_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "engine/backend/backend.h"

namespace seqboat {

// threads <= 0 keeps the OpenMP/OpenBLAS default (one per core).
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_CPU_CPU_BACKEND_H_
