#include "kernels/gpu_test_util.h"
