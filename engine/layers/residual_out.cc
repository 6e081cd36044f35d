#include "engine/layers/residual_out.h"

#include <numeric>

namespace seqboat {

void ResidualOut::Add(Backend& be, GemmParams proj, float* spare) {
  if (scale_ == 1.0f) {
    proj.accumulate = true;
    be.Gemm(proj);
    return;
  }
  const int n = proj.n, d = static_cast<int>(proj.w.rows);
  if (static_cast<int>(rows_.size()) < n) {
    rows_.resize(n);
    std::iota(rows_.begin(), rows_.end(), 0);
    scales_.assign(n, scale_);
  }
  ScatterAddParams add;
  add.d = d;
  add.rows = rows_.data();
  add.scales = scales_.data();
  add.m = n;
  add.dst = proj.y;
  add.lddst = proj.ldy;
  proj.y = spare;
  proj.ldy = d;
  proj.accumulate = false;
  be.Gemm(proj);
  add.src = spare;
  be.ScatterAddScaled(add);
}

}  // namespace seqboat
