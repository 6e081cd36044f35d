"""fuzz_target: one libFuzzer target and the regression test of its corpus."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def fuzz_target(name, srcs, deps = []):
    """Declares <name>_fuzzer and <name>_corpus_test.

    <name>_fuzzer is a libFuzzer binary under --config=fuzz and, in any other
    build, a replay binary that runs the files and folders it is given.
    <name>_corpus_test replays corpus/<name>/ (the seeds and every input that
    once failed) in the normal test suite.
    """
    cc_library(
        name = name + "_fuzz_lib",
        srcs = srcs,
        deps = deps + ["//fuzz:fuzz_check"],
        alwayslink = True,
    )
    cc_binary(
        name = name + "_fuzzer",
        deps = [":" + name + "_fuzz_lib"] + select({
            "//fuzz:libfuzzer": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        linkopts = select({
            "//fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_fuzz_lib",
            "//fuzz:replay_main",
        ],
    )
