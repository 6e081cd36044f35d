#include "kernels/mamba_kernels.h"
