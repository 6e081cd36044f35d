#include "kernels/cuda/dense_params.h"

namespace seqboat::cuda {

EmbedParams EmbedParamsFor(const int32_t* dev_ids, int n, const Matrix& table,
                           Storage storage, float scale, float* out) {
  EmbedParams p;
  p.ids = dev_ids;
  p.n = n;
  p.table = table.data;
  p.storage = storage;
  p.d = static_cast<int>(table.cols);
  p.scale = scale;
  p.out = out;
  return p;
}

ActivateMulParams ActivateMulParamsFor(const float* a, int lda, const float* b,
                                       int ldb, int n, int f, Activation act,
                                       float* out, int ldo, bool accumulate) {
  ActivateMulParams p;
  p.a = a;
  p.lda = lda;
  p.b = b;
  p.ldb = ldb;
  p.n = n;
  p.f = f;
  p.act = act;
  p.out = out;
  p.ldo = ldo;
  p.accumulate = accumulate;
  return p;
}

GemvParams GemvParamsFor(const float* x, int ldx, int n, const Matrix& w,
                         Storage storage, const float* bias, float* y, int ldy,
                         bool accumulate) {
  GemvParams g;
  g.x = x;
  g.ldx = ldx;
  g.n = n;
  g.w = w.data;
  g.storage = storage;
  g.rows = static_cast<int>(w.rows);
  g.cols = static_cast<int>(w.cols);
  g.bias = bias;
  g.y = y;
  g.ldy = ldy;
  g.accumulate = accumulate;
  return g;
}

}  // namespace seqboat::cuda
