#!/usr/bin/env python3
"""Prints the functions over LIMIT lines (default 150) and the files over 800 non-test lines in
services/ and integration-tests/src/, tests and benches left out. A rough count: from each `fn`
line to the closing brace at the same indentation; a file's test module starts at its first
`#[cfg(test)]` followed by an inline `mod … {`. Used for ARCHITECTURE.md's "Crates by role"."""
import glob
import re
import sys

limit = int(sys.argv[1]) if len(sys.argv) > 1 else 150
long_fns, long_files = [], []
for f in sorted(glob.glob("services/**/*.rs", recursive=True) + glob.glob("integration-tests/src/**/*.rs", recursive=True)):
    if "/benches/" in f or f.endswith("/tests.rs") or "/tests/" in f:
        continue
    text = open(f).read()
    m = re.search(r"^#\[cfg\(test\)\]\n(pub\(crate\) )?mod \w+ \{", text, re.M)
    lines = text[: m.start()].split("\n") if m else text.split("\n")
    if len(lines) > 800:
        long_files.append((len(lines), f))
    for i, line in enumerate(lines):
        fm = re.match(r"^(\s*)(pub(\([a-z]+\))? )?(async )?(const )?(unsafe )?fn (\w+)", line)
        if not fm or line.rstrip().endswith(";"):
            continue
        indent = fm.group(1)
        j = i + 1
        while j < len(lines) and not (lines[j].startswith(indent + "}") and len(lines[j]) - len(lines[j].lstrip()) == len(indent)):
            j += 1
        if j - i + 1 > limit:
            long_fns.append((j - i + 1, f, fm.group(7)))
for n, f, name in sorted(long_fns, reverse=True):
    print(f"function {name} in {f}: {n} lines")
for n, f in sorted(long_files, reverse=True):
    print(f"file {f}: {n} non-test lines")
