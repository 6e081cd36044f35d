"""A .cu file compiled as C++ for the CUDA emulation (tools/cuda_emu)."""

load("@rules_cc//cc:defs.bzl", "cc_library")

def emulated_kernels(name, src, hdrs = [], deps = []):
    """A cc_library of `src` (a .cu file) running on the CPU emulation.

    The genrule prepends cuda_emulation.h to a copy of the .cu file, with a
    #line directive so that diagnostics name the .cu file's own lines.

    Args:
      name: the cc_library.
      src: the .cu file's label, e.g. "//kernels/cuda:mamba_kernels.cu".
      hdrs: headers the .cu file includes (its launcher header, the shared
        math), listed as textual headers; .cuh files are accepted there.
      deps: cc_library targets for the headers' own dependencies.
    """
    cc = name + ".cc"
    native.genrule(
        name = name + "_cc",
        srcs = [src],
        outs = [cc],
        cmd = ("(echo '#include \"tools/cuda_emu/cuda_emulation.h\"'; " +
               "echo '#line 1 \"$<\"'; cat $<) > $@"),
    )
    cc_library(
        name = name,
        testonly = True,
        srcs = [cc],
        textual_hdrs = hdrs + [
            "//kernels/cuda:launch.cuh",
            "//kernels/cuda:launch_queue.h",
        ],
        # `#pragma unroll` is nvcc's.
        copts = ["-Wno-unknown-pragmas"],
        deps = deps + ["//tools/cuda_emu:emulator"],
    )
