#!/usr/bin/env python3
"""Finds import cycles between the source files of a crate.

A file imports another when one of its `use` paths (outside `#[cfg(test)]`
modules and test files) names an item defined in it. A module's files may
use their ancestors' items (a type whose `impl` is split over its child
files, as `stat/live/*.rs` do with `LiveWindows`): those imports are part
of one module and are not counted; a cycle is between modules that are not
nested in each other. Paths go through
re-exports (`pub use child::Item` in a `mod.rs`), so a child that imports
its parent's re-export of a sibling depends on the sibling, not on the
parent. A group of files that import each other, directly or around a
circle, is printed and makes the exit status 1.

Usage: import_cycles.py CRATE_SRC_DIR [--facade FILE]...

`--facade FILE` (relative to CRATE_SRC_DIR): imports of FILE are not
counted. For the type every layer is handed (`Sentinel`, whose entries,
contexts and managers refer back to it), as a runtime's handle is.
"""
import os
import re
import sys

SRC = os.path.abspath(sys.argv[1])
FACADES = {
    os.path.join(SRC, sys.argv[i + 1])
    for i, arg in enumerate(sys.argv)
    if arg == "--facade" and i + 1 < len(sys.argv)
}
TEST_FILE = re.compile(r"(^|/)(tests?|loom_tests|[a-z_]+_tests)\.rs$")


def module_file(parts):
    """The file of module `parts` (a list of names from the crate root)."""
    base = os.path.join(SRC, *parts) if parts else SRC
    for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.isfile(candidate):
            return candidate
    if not parts:
        return os.path.join(SRC, "lib.rs")
    return None


def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return rel


def strip_tests(text):
    """The text without `#[cfg(test)]` items (a module or a function)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\((test|loom|all\(test[^\]]*)\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        j = m.end()
        # Skip to the end of the next item: a `;` or a balanced `{...}`.
        depth, k = 0, j
        while k < len(text):
            c = text[k]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    k += 1
                    break
            elif c == ";" and depth == 0:
                k += 1
                break
            k += 1
        i = k
    out.append(text[i:])
    return "".join(out)


def use_trees(text):
    """Every `use ...;` statement's tree, as text."""
    text = re.sub(r"//[^\n]*", "", text)
    return [m.group(1) for m in re.finditer(r"\buse\s+([^;]+);", text)]


def expand(tree):
    """The paths of a use tree (`a::{b, c::d}` -> a::b, a::c::d)."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(r"\bas\w+", "", tree.replace(" as ", " as"))
    paths = []

    def walk(prefix, t):
        depth, start, items = 0, 0, []
        if "{" not in t:
            paths.append(prefix + t.split(" as ")[0])
            return
        head = t[: t.index("{")]
        body = t[t.index("{") + 1 : t.rindex("}")]
        for i, c in enumerate(body):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                items.append(body[start:i])
                start = i + 1
        items.append(body[start:])
        for item in items:
            if item:
                walk(prefix + head, item)

    walk("", tree)
    return paths


def resolve(path, here):
    """The crate-relative module parts of `path` used in module `here`."""
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    if parts[0] == "crate":
        return parts[1:]
    base = list(here)
    if parts[0] == "self":
        return base + parts[1:]
    if parts[0] == "super":
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
        return base + parts
    # A child module declared here (`use child::Item`).
    if module_file(base + parts[:1]):
        return base + parts
    return None


DEFINES = {}


def reexports(file):
    """Item name -> the path it re-exports, for `pub use` lines of `file`."""
    if file in DEFINES:
        return DEFINES[file]
    found = {}
    text = strip_tests(open(file).read())
    here = module_of(file)
    for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", text):
        for p in expand(m.group(2)):
            name = p.split("::")[-1]
            target = resolve(p, here)
            if target:
                found[name] = target
    DEFINES[file] = found
    return found


def target_file(parts, seen=0):
    """The file defining the item at `parts` (following re-exports)."""
    for n in range(len(parts), -1, -1):
        file = module_file(parts[:n])
        if not file:
            continue
        rest = parts[n:]
        if rest and rest[0] not in ("*", "self") and seen < 8:
            via = reexports(file).get(rest[0])
            if via and via != parts:
                return target_file(via + rest[1:], seen + 1)
        return file
    return None


def is_ancestor(module, of):
    """Whether `module` is `of` or contains it."""
    return of[: len(module)] == module


def main():
    files = []
    for root, _, names in os.walk(SRC):
        for name in names:
            path = os.path.join(root, name)
            if name.endswith(".rs") and not TEST_FILE.search(os.path.relpath(path, SRC)):
                files.append(path)
    edges = {f: set() for f in files}
    for file in files:
        here = module_of(file)
        text = strip_tests(open(file).read())
        for tree in use_trees(text):
            for path in expand(tree):
                parts = resolve(path, here)
                if parts is None:
                    continue
                target = target_file(parts)
                if (
                    target
                    and target != file
                    and target in edges
                    and target not in FACADES
                    and not is_ancestor(module_of(target), here)
                ):
                    edges[file].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    for comp in comps:
        names = sorted(os.path.relpath(f, SRC) for f in comp)
        print(f"cycle of {len(names)} files: " + ", ".join(names))
        for f in sorted(comp):
            inside = sorted(os.path.relpath(t, SRC) for t in edges[f] if t in comp)
            print(f"  {os.path.relpath(f, SRC)} -> {', '.join(inside)}")
    return 1 if comps else 0


sys.exit(main())
