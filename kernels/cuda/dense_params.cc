#include "kernels/cuda/dense_params.h"

namespace seqboat::cuda {

GemvParams GemvParamsFor(const GemmParams& p, Storage storage) {
  GemvParams g;
  g.x = p.x;
  g.ldx = p.ldx;
  g.n = p.n;
  g.w = p.w.data;
  g.storage = storage;
  g.rows = static_cast<int>(p.w.rows);
  g.cols = static_cast<int>(p.w.cols);
  g.bias = p.bias;
  g.y = p.y;
  g.ldy = p.ldy;
  g.accumulate = p.accumulate;
  return g;
}

}  // namespace seqboat::cuda
