"""README's Layout block is the table of contents of the tree: every folder it
names exists, and every folder of the tree down to the second level (those
holding tracked files) is named in it."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def layout_block():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.S | re.M)
    assert m, "README.md has no ## Layout section with a code block"
    return m.group(1).splitlines()


def named_folders():
    """Paths named by the block: top-level lines, and indented lines under
    the last top-level one."""
    named, parent = set(), None
    for line in layout_block():
        m = re.match(r"^( *)([\w.-]+)/(\s|$)", line)
        assert m, f"layout line is not 'folder/  what it holds': {line!r}"
        indent, name = len(m.group(1)), m.group(2)
        if indent == 0:
            parent = name
            named.add(name)
        else:
            assert indent == 2 and parent, f"bad nesting: {line!r}"
            named.add(f"{parent}/{name}")
    return named


def tree_folders():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    folders = set()
    for f in files:
        parts = f.split("/")[:-1]
        if parts and not parts[0].startswith("."):
            folders.add(parts[0])
            if len(parts) > 1:
                folders.add("/".join(parts[:2]))
    return folders


def test_every_named_folder_exists():
    missing = sorted(p for p in named_folders() if not (ROOT / p).is_dir())
    assert not missing, f"README names folders that do not exist: {missing}"


def test_every_folder_is_named():
    unnamed = sorted(tree_folders() - named_folders())
    assert not unnamed, f"README's Layout block does not name: {unnamed}"


def architecture_folders():
    """Folders named at the start of a line in ARCHITECTURE.md's first code
    block: top-level ones, and indented ones under the last top-level one."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    m = re.search(r"^```\n(.*?)^```", text, re.S | re.M)
    assert m, "ARCHITECTURE.md has no code block with the units"
    named, parent = set(), None
    for line in m.group(1).splitlines():
        top = re.match(r"^([\w.-]+(?:/[\w.-]+)*)/(\s|$)", line)
        sub = re.match(r"^  ([\w.-]+)/(\s|$)", line)
        if top:
            parent = top.group(1).split("/")[0]
            named.add(top.group(1))
        elif sub and parent:
            named.add(f"{parent}/{sub.group(1)}")
    return named


def test_architecture_names_real_folders_and_every_top_level_one():
    named = architecture_folders()
    missing = sorted(p for p in named if not (ROOT / p).is_dir())
    assert not missing, f"ARCHITECTURE.md names folders that do not exist: {missing}"
    top = {p for p in tree_folders() if "/" not in p}
    tops = {p.split("/")[0] for p in named}
    assert not sorted(top - tops), f"ARCHITECTURE.md leaves out: {sorted(top - tops)}"
