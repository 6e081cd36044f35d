// The backend activation of an FFN config's `act` (mlp and moe blocks).
#ifndef SEQBOAT_ENGINE_LAYERS_FFN_ACTIVATION_H_
#define SEQBOAT_ENGINE_LAYERS_FFN_ACTIVATION_H_

#include "engine/backend/backend.h"
#include "engine/model/config.h"

namespace seqboat {

Activation ToActivation(FfnAct act);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_FFN_ACTIVATION_H_
