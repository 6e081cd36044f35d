#include "kernels/seqboat_kernels.h"
