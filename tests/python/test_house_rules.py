"""The house's limits, held by the tree itself: product files and functions
stay small enough to read in one sitting, and the folders' dependencies
point one way (ARCHITECTURE.md §1)."""

import shutil
import subprocess

import pytest

from house_rules import MAX_FILE_LINES, MAX_FUNCTION_LINES, ROOT, cpp_functions, measure


def test_no_product_file_is_over_the_limit():
    over = [(n, f) for f, n, _ in measure() if n > MAX_FILE_LINES]
    assert not over, f"product files over {MAX_FILE_LINES} lines: {sorted(over, reverse=True)}"


def test_no_product_function_is_over_the_limit():
    over = [(length, f"{f}:{start}") for f, _, funcs in measure()
            for start, length in funcs if length > MAX_FUNCTION_LINES]
    assert not over, (f"product functions over {MAX_FUNCTION_LINES} lines: "
                      f"{sorted(over, reverse=True)}")


def test_the_measure_finds_functions_and_skips_what_is_not_one():
    source = """
namespace a {
struct S { int x; void F() { if (x) { x = 1; } } };
static const int kTable[] = {1, 2, 3};
int G(int y) {
  auto f = [](int z) { return z; };
  return f(y) + "}"[0];  // a brace in a string: }
}
}  // namespace a
"""
    found = cpp_functions(source)
    assert found == [(3, 1), (5, 4)], found


def bazel_query(expression):
    bazel = shutil.which("bazel")
    if bazel is None:
        pytest.fail("bazel is not on PATH; deploy/setup.sh installs it")
    out = subprocess.run([bazel, "query", "--noshow_progress", expression],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return [line for line in out.stdout.split() if line.startswith("//")]


def test_backends_depend_on_nothing_of_the_engine_but_its_op_interface():
    reached = bazel_query("deps(//kernels/...) intersect //engine/...")
    stray = sorted(t for t in reached if not t.startswith("//engine/backend"))
    assert not stray, f"kernels/ reaches into engine/ beyond engine/backend: {stray}"


def test_layers_do_not_depend_on_the_model():
    reached = bazel_query("deps(//engine/layers/...) intersect //engine/model/...")
    assert not reached, f"engine/layers depends on engine/model: {reached}"
