"""Sizes of the tree's product code: files and functions, measured the same way
by the test that holds them to the house's limits and by anyone planning a
split (`python3 tests/python/house_rules.py` prints the largest).

Product code is every tracked C++, CUDA and Python source that is not a test,
a test helper, a benchmark, a fuzz target or generated. C++ functions are
found by braces: a `{` outside any function whose statement so far holds a
parameter list and no initialiser `=` opens a function; its length runs from
that line to the matching `}`. Lambdas and local classes count toward the
function that holds them."""

import ast
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 150

CPP_SUFFIXES = (".cc", ".h", ".cu", ".cuh")
NOT_PRODUCT = re.compile(
    r"(^|/)(tests?|testing|fuzz|bench|third_party)/"
    r"|_test\.(cc|py)$|(^|/)test_[^/]*\.py$|_pb2(_grpc)?\.py$"
    r"|(^|/)conftest\.py$")


def product_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others",
                          "--exclude-standard"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    for f in sorted(set(out)):
        if NOT_PRODUCT.search(f) or not (ROOT / f).is_file():
            continue
        if f.endswith(CPP_SUFFIXES) or f.endswith(".py"):
            yield f


def _strip_cpp(text):
    """Comments, string and character literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cpp_functions(text):
    """(first line, line count) of each function body in C++ source."""
    code = _strip_cpp(text)
    stack = []  # per open brace: "func", "scope" (namespace, class) or "other"
    statement, line, found = [], 1, []
    for ch in code:
        if ch == "\n":
            line += 1
        if ch == "{":
            head = "".join(statement)
            if any(kind in ("func", "other") for kind, _ in stack):
                kind = "other"
            elif re.search(r"\b(namespace|extern)\b", head):
                kind = "scope"
            elif (")" in head and not re.search(r"(?<![=!<>])=(?!=)", head.replace("operator=", ""))
                  and not re.match(r"\s*(enum|union)\b", head)):
                kind = "func"
            elif re.search(r"\b(class|struct|union|enum)\b", head):
                kind = "scope"
            else:
                kind = "other"
            stack.append((kind, line))
            statement = []
        elif ch == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "func":
                    found.append((start, line - start + 1))
            statement = []
        elif ch == ";":
            statement = []
        else:
            statement.append(ch)
    return found


def python_functions(text):
    tree = ast.parse(text)
    return [(node.lineno, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def measure():
    """[(path, lines in file, [(first line, function lines)])]."""
    result = []
    for f in product_files():
        text = (ROOT / f).read_text(errors="replace")
        funcs = python_functions(text) if f.endswith(".py") else cpp_functions(text)
        result.append((f, text.count("\n"), funcs))
    return result


def main():
    rows = measure()
    print(f"{len(rows)} product files")
    print("largest files:")
    for f, n, _ in sorted(rows, key=lambda r: -r[1])[:15]:
        print(f"  {n:6d}  {f}")
    print("longest functions:")
    funcs = [(length, f, start) for f, _, fs in rows for start, length in fs]
    for length, f, start in sorted(funcs, reverse=True)[:25]:
        print(f"  {length:6d}  {f}:{start}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
