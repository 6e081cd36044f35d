"""nvcc through genrules: one object per .cu file, wrapped as a cc_library.

Bazel 4 has no CUDA rules and nothing may be downloaded, so each .cu file is
compiled by /usr/local/cuda/bin/nvcc in a genrule and the objects are linked
like any precompiled object. Only CUDA and the shared per-element math headers
may be included from .cu files (no absl, no gRPC), which keeps nvcc's job
small.
"""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

NVCC = "/usr/local/cuda/bin/nvcc"

# H100/H200 (sm_90) machine code plus PTX that newer GPUs can JIT. No
# -lineinfo: it more than doubled the machine code (the GEMV's object was
# 16.5 MB), and the GPU bundle must travel within the device machine's
# limit; the sanitizers and ncu still name every kernel. Add it locally to
# read a report by source line.
NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
    "-Xcompiler -fPIC",
])

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """A cc_library of the objects nvcc makes from `srcs` (.cu files).

    Args:
      name: the cc_library.
      srcs: .cu files, one object each.
      hdrs: headers the .cu files include (also exported to C++ users).
        Every launcher header may include launch_queue.h: each library
        brings it.
      deps: cc_library targets whose headers the .cu files include; their
        header files must also be listed in `hdrs` or `cu_hdrs` of this
        target, since genrules only see files passed to them.
      **kwargs: passed to the cc_library.
    """
    cu_hdrs = kwargs.pop("cu_hdrs", [])
    objs = []
    for src in srcs:
        stem = src[:-len(".cu")]
        obj = "_nvcc/%s/%s.pic.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem.replace("/", "_")),
            srcs = [src, "//kernels/cuda:launch_queue.h"] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = "%s %s -I. -c $(location %s) -o $@" % (NVCC, NVCC_FLAGS, src),
            message = "nvcc %s" % src,
        )
        objs.append(obj)
    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["//kernels/cuda:launch_queue", "//third_party:cuda"],
        **kwargs
    )

def gpu_test(name, deps = []):
    """A test that needs a GPU: `name`.cc, tagged "gpu".

    `bazel test` leaves it out (.bazelrc); `bazel test --config=gpu` runs it,
    and kernels/gpu_bundle.sh packs every kernels/cuda/*_gpu_test.cc as the
    target of that name, which this macro keeps true.

    Args:
      name: the cc_test, and its source file without ".cc".
      deps: what it needs beyond the GPU test helpers (gpu_test_util, which
        brings the CPU and CUDA backends) and gtest's main.
    """
    cc_test(
        name = name,
        srcs = [name + ".cc"],
        tags = ["gpu"],
        deps = deps + [
            "//kernels/cuda/testing:gpu_test_util",
            "//third_party:gtest_main",
        ],
    )
