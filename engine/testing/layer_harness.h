// One block built from tensors a test writes, with an arena of its own, on
// the CPU backend: what the per-kind layer tests share. The test supplies
// the kind's Make function; the harness writes the tensors to a temporary
// safetensors file, builds the block at prefix "b." and runs steps of rows
// split into segments.
#ifndef SEQBOAT_ENGINE_TESTING_LAYER_HARNESS_H_
#define SEQBOAT_ENGINE_TESTING_LAYER_HARNESS_H_

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/layers/block.h"
#include "engine/layers/layer.h"
#include "engine/model_dir/weight_store.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors_writer.h"

namespace seqboat {

struct LayerHarness {
  using Tensors = std::map<std::string, F32Tensor>;
  using MakeBlock =
      std::function<absl::StatusOr<std::unique_ptr<Layer>>(const BlockSite&)>;

  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<Layer> layer;
  DeviceBuffer state;
  Tensors weights;

  // Builds the block of `d_model` from `w` with `slots` zeroed slots, named
  // `where` in errors ("blocks[0] (mamba2)"); OK once every tensor was used.
  absl::Status Init(const MakeBlock& make, const std::string& where,
                    int d_model, Tensors w, int slots) {
    weights = std::move(w);
    const char* dir = std::getenv("TEST_TMPDIR");
    const std::string path =
        absl::StrCat(dir != nullptr ? dir : "/tmp", "/layer_",
                     reinterpret_cast<uintptr_t>(this), ".safetensors");
    EXPECT_TRUE(WriteF32Safetensors(path, weights).ok()) << path;
    auto ws = WeightStore::Open(path);
    if (!ws.ok()) return ws.status();
    store = *std::move(ws);
    BlockSite site;
    site.where = where;
    site.prefix = "b.";
    site.d_model = d_model;
    site.weights = store.get();
    site.backend = backend.get();
    auto l = make(site);
    if (!l.ok()) return l.status();
    layer = *std::move(l);
    auto buf = backend->Alloc(slots * layer->StateBytesPerSlot());
    if (!buf.ok()) return buf.status();
    state = *buf;
    // Alloc's memory is zeroed: every slot starts before its first token.
    layer->BindState(state.get(), layer->StateBytesPerSlot());
    return store->CheckAllUsed();
  }

  // Runs rows x [n, d_model] split into `segs`; returns the new residual.
  std::vector<float> Step(std::vector<float> x,
                          const std::vector<Segment>& segs, int d_model) const {
    const int n = static_cast<int>(x.size()) / d_model;
    std::vector<float> scratch(layer->ScratchFloatsPerRow() * n);
    StepRows rows;
    rows.ids.assign(n, 0);  // a block reads the row count and the segments
    rows.segs = segs;
    const StepContext ctx{backend.get(), &rows, scratch.data()};
    EXPECT_TRUE(layer->Forward(ctx, x.data()).ok());
    return x;
  }

  // Slot s's state, its bytes.
  const char* SlotBytes(int s) const {
    return static_cast<const char*>(state.get()) +
           s * layer->StateBytesPerSlot();
  }
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_LAYER_HARNESS_H_
