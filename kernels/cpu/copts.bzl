"""Compiler flags of the CPU backend's loops, shared with the tests that
check the shared op math under them."""

# The scans' sums over a state vector only vectorise when additions may be
# reordered (-ffast-math; op_math's Exp and Log are plain arithmetic, so no
# libm call stands in the way); NaN/inf handling stays on.
CPU_MATH_COPTS = [
    "-O3",
    "-ffast-math",
    "-fno-finite-math-only",
]
