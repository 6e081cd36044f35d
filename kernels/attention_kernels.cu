#include "kernels/attention_kernels.h"
