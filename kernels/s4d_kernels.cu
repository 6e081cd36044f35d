#include "kernels/s4d_kernels.h"
