#!/usr/bin/env python3
"""Fails when a function outside tests/ and bench/ is longer than the house limit (80 lines).

A function is a brace block opened right after a parameter list (optionally followed by
qualifiers, a trailing return type or a constructor's initializer list) in a namespace or class
scope; its length counts the lines from its signature's first line to its closing brace. Comments
and string literals are blanked before scanning. Usage: check-function-length.py [--max N] [root]
"""
import os
import re
import sys

SKIP_DIRS = {"tests", "bench", "build", ".git", "results", "third_party"}
EXTS = (".h", ".cpp", ".cu", ".cuh")


def blank(text):
    """Comments, string and char literals become spaces; newlines are kept so lines still count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


HEAD = re.compile(
    r"\)\s*(const|noexcept(\s*\([^)]*\))?|override|final|mutable|&&|&|\s)*"
    r"(->\s*[\w:<>,\s\*&]+)?\s*$")
INIT = re.compile(r"\)\s*(noexcept)?\s*:\s*[\w:]+\s*[\({]")


def functions(path, text):
    clean = blank(text)
    scopes = []  # for each open brace: (kind, start_line)
    line = 1
    last_stmt_end = 0  # index after the last ';', '{' or '}' at this level
    found = []
    for i, c in enumerate(clean):
        if c == "\n":
            line += 1
        elif c == "{":
            inside_function = any(k == "fn" for k, _ in scopes)
            head = clean[last_stmt_end:i]
            kind = "block"
            if not inside_function:
                h = head.rstrip()
                if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", h) or h.endswith("="):
                    kind = "scope"
                elif HEAD.search(h) or INIT.search(h) or re.search(r"\)\s*(noexcept)?\s*:", h):
                    kind = "fn"
                else:
                    kind = "scope" if not h.strip() or h.strip().startswith("extern") else "block"
                if kind == "fn":
                    start = line - head.count("\n") + (len(head) - len(head.lstrip())
                                                        and head[: len(head) - len(head.lstrip())].count("\n"))
                    name = re.findall(r"([~\w:]+(?:operator\S*)?)\s*\(", head)
                    scopes.append(("fn", (start, name[0] if name else "?")))
                    last_stmt_end = i + 1
                    continue
            scopes.append((kind, line))
            last_stmt_end = i + 1
        elif c == "}":
            if scopes:
                kind, info = scopes.pop()
                if kind == "fn":
                    start, name = info
                    found.append((start, line, name))
            last_stmt_end = i + 1
        elif c == ";":
            last_stmt_end = i + 1
        elif c == "#" and (i == 0 or clean[i - 1] == "\n"):
            # a preprocessor line ends the statement it is part of
            j = clean.find("\n", i)
            last_stmt_end = (len(clean) if j < 0 else j)
    return found


def main():
    args = sys.argv[1:]
    limit = 80
    if args[:1] == ["--max"]:
        limit = int(args[1])
        args = args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        top = rel.split(os.sep)[0]
        if top in SKIP_DIRS or top.startswith("build") or (top.startswith(".") and top != "."):
            dirs[:] = []
            continue
        for f in sorted(files):
            if not f.endswith(EXTS):
                continue
            p = os.path.join(d, f)
            with open(p, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for start, end, name in functions(p, text):
                if end - start + 1 > limit:
                    bad.append((end - start + 1, os.path.relpath(p, root), start, name))
    for n, p, start, name in sorted(bad, reverse=True):
        print(f"{p}:{start}: {name} is {n} lines (limit {limit})")
    if bad:
        print(f"{len(bad)} functions over {limit} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
