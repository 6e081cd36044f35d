#include "engine/layers/ffn_activation.h"

namespace seqboat {

Activation ToActivation(FfnAct act) {
  switch (act) {
    case FfnAct::kGelu:
      return Activation::kGelu;
    case FfnAct::kGeluTanh:
      return Activation::kGeluTanh;
    case FfnAct::kRelu:
      return Activation::kRelu;
    case FfnAct::kSilu:
      return Activation::kSilu;
  }
  return Activation::kIdentity;
}

}  // namespace seqboat
