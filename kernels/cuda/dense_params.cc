#include "kernels/cuda/dense_params.h"

#include <algorithm>

namespace seqboat::cuda {

GemvParams GemvParamsFor(const GemmParams& p, Storage storage,
                         float* partials) {
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
  g.residual_scale = p.residual_scale;
  g.partials = partials;
  g.norm = p.norm;
  g.conv = p.conv;
  return g;
}

bool GemvAppliesConv(const GemmParams& p) {
  return p.n <= kGemvMaxRows && AllDecodeRows(p.conv.segs, p.conv.nsegs);
}

HalfFormat GemmInputFormatFor(Storage s, int n) {
  return n <= kGemvMaxRows ? HalfFormat::kNone : CublasInputFormat(s);
}

bool GemmReadsX16(const GemmParams& p, Storage s) {
  return p.norm.kind == NormKind::kNone && p.x16.data != nullptr &&
         p.x16.format != HalfFormat::kNone &&
         p.x16.format == GemmInputFormatFor(s, p.n);
}

void FedMapFor(const EmbedParams& p, std::vector<int32_t>* map) {
  map->assign(static_cast<size_t>(std::max(p.n, 0)), -1);
  for (int k = 0; k < p.nfed; ++k) (*map)[p.fed_rows[k]] = -(p.fed_from[k] + 2);
}

}  // namespace seqboat::cuda
