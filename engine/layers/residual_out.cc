#include "engine/layers/residual_out.h"

namespace seqboat {

void ResidualOut::Add(Backend& be, GemmParams proj) const {
  proj.accumulate = true;
  proj.residual_scale = scale_;
  be.Gemm(proj);
}

}  // namespace seqboat
