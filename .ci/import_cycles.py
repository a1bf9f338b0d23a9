#!/usr/bin/env python3
"""Finds import cycles between the source files of a crate.

A file imports another when a path it writes (outside `#[cfg(test)]` items
and test files) names an item defined in the other: a `use` line (grouped,
renamed or `pub use`), or a path written in place in a type or an
expression (`crate::a::B`, `super::x::y(...)`, `self::x::Z`, a child
module's `child::f()`, or a path through a name a `use` line brought in,
`use super::cluster; ... cluster::check(...)`). Comments, string literals
and `pub(in path)` visibilities are not uses.

A module's files may use their ancestors' items (a type whose `impl` is
split over its child files, as `stat/live/*.rs` do with `LiveWindows`):
those imports are part of one module and are not counted; a cycle is
between modules that are not nested in each other. Paths go through
re-exports (`pub use child::Item` in a `mod.rs`), so a child that imports
its parent's re-export of a sibling depends on the sibling, not on the
parent. A group of files that import each other, directly or around a
circle, is printed and makes the exit status 1.

Usage: import_cycles.py CRATE_SRC_DIR [--facade FILE]...
       import_cycles.py --self-test

`--facade FILE` (relative to CRATE_SRC_DIR): imports of FILE are not
counted. For the type every layer is handed (`Sentinel`, whose entries,
contexts and managers refer back to it), as a runtime's handle is.

`--self-test` runs the check on small synthetic crates and fails unless it
finds exactly the cycles each one has.
"""
import os
import re
import sys
import tempfile

TEST_FILE = re.compile(r"(^|/)(tests?|loom_tests|[a-z_]+_tests)\.rs$")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A path written in place: two or more segments, not preceded by another
# segment (`a::b::c` is found once, from `a`). `$crate` paths (in a macro's
# body) are the crate's own paths.
IN_PLACE = re.compile(
    r"(?<![A-Za-z0-9_:])\$?(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)"
)


def strip_comments_and_strings(text):
    """The text with comments removed and string/char literals emptied."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:])
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


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


USE = re.compile(r"\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);")


def expand(tree):
    """The (path, bound name) pairs of a use tree: `a::{b, c::d as e}` ->
    (a::b, b), (a::c::d, e). A glob binds no name."""
    tree = re.sub(r"\s+as\s+", "@", tree.strip())
    tree = re.sub(r"\s+", "", tree)
    pairs = []

    def walk(prefix, t):
        if "{" not in t:
            path, _, alias = t.partition("@")
            full = prefix + path
            last = full.split("::")[-1]
            if last == "self":
                full = full[: -len("::self")]
                last = full.split("::")[-1]
            pairs.append((full, alias or (None if last == "*" else last)))
            return
        head = t[: t.index("{")]
        body = t[t.index("{") + 1 : t.rindex("}")]
        depth, start, items = 0, 0, []
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
    return pairs


class Crate:
    def __init__(self, src, facades=()):
        self.src = os.path.abspath(src)
        self.facades = {os.path.join(self.src, f) for f in facades}
        self.defines = {}
        self.texts = {}

    def text(self, file):
        """`file` without tests, comments and string literals."""
        if file not in self.texts:
            with open(file) as f:
                raw = f.read()
            self.texts[file] = strip_tests(strip_comments_and_strings(raw))
        return self.texts[file]

    def module_file(self, parts):
        """The file of module `parts` (a list of names from the crate root)."""
        base = os.path.join(self.src, *parts) if parts else self.src
        for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.isfile(candidate):
                return candidate
        if not parts:
            return os.path.join(self.src, "lib.rs")
        return None

    def module_of(self, path):
        rel = os.path.relpath(path, self.src)[:-3].split(os.sep)
        if rel[-1] in ("mod", "lib", "main"):
            rel = rel[:-1]
        return rel

    def resolve(self, path, here, aliases=None):
        """The crate-relative parts of `path` written in module `here`, or
        None for a path outside the crate."""
        parts = [p for p in re.sub(r"\s+", "", path).split("::") if p]
        if not parts:
            return None
        if parts[0] in ("crate", "$crate"):
            return parts[1:]
        base = list(here)
        if parts[0] == "self":
            return base + parts[1:]
        if parts[0] == "super":
            while parts and parts[0] == "super":
                base = base[:-1]
                parts = parts[1:]
            return base + parts
        # A child module declared here (`child::Item`).
        if self.module_file(base + parts[:1]):
            return base + parts
        # A name a `use` line of this file brought in.
        if aliases and parts[0] in aliases:
            return aliases[parts[0]] + parts[1:]
        return None

    def reexports(self, file):
        """Item name -> the path it re-exports, for `pub use` lines of `file`."""
        if file in self.defines:
            return self.defines[file]
        found = {}
        here = self.module_of(file)
        for m in USE.finditer(self.text(file)):
            if not m.group(1):
                continue
            for path, name in expand(m.group(3)):
                target = self.resolve(path, here)
                if target and name:
                    found[name] = target
        self.defines[file] = found
        return found

    def target_file(self, parts, seen=0):
        """The file defining the item at `parts` (following re-exports)."""
        for n in range(len(parts), -1, -1):
            file = self.module_file(parts[:n])
            if not file:
                continue
            rest = parts[n:]
            if rest and rest[0] not in ("*", "self") and seen < 8:
                via = self.reexports(file).get(rest[0])
                if via and via != parts:
                    return self.target_file(via + rest[1:], seen + 1)
            return file
        return None

    def files(self):
        found = []
        for root, _, names in os.walk(self.src):
            for name in names:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, self.src)
                if name.endswith(".rs") and not TEST_FILE.search(rel):
                    found.append(path)
        return sorted(found)

    def paths_used(self, file):
        """The crate-relative parts of every path `file` uses."""
        here = self.module_of(file)
        text = self.text(file)
        aliases, used = {}, []
        for m in USE.finditer(text):
            for path, name in expand(m.group(3)):
                parts = self.resolve(path, here)
                if parts is None:
                    continue
                used.append(parts)
                if name:
                    aliases[name] = parts
        body = USE.sub(" ", text)
        body = re.sub(r"\bpub\s*\(\s*in\s+[^)]*\)", "pub", body)
        for m in IN_PLACE.finditer(body):
            parts = self.resolve(m.group(1), here, aliases)
            if parts is not None:
                used.append(parts)
        return used

    def edges(self):
        files = self.files()
        edges = {f: set() for f in files}
        for file in files:
            here = self.module_of(file)
            for parts in self.paths_used(file):
                target = self.target_file(parts)
                if (
                    target
                    and target != file
                    and target in edges
                    and target not in self.facades
                    and not is_ancestor(self.module_of(target), here)
                ):
                    edges[file].add(target)
        return edges

    def cycles(self):
        """The strongly connected groups of more than one file, with their
        edges inside the group."""
        edges = self.edges()
        comps = strongly_connected(edges)
        out = []
        for comp in comps:
            inside = {
                os.path.relpath(f, self.src): sorted(
                    os.path.relpath(t, self.src) for t in edges[f] if t in comp
                )
                for f in comp
            }
            out.append(dict(sorted(inside.items())))
        return sorted(out, key=lambda c: list(c))


def is_ancestor(module, of):
    """Whether `module` is `of` or contains it."""
    return of[: len(module)] == module


def strongly_connected(edges):
    """Tarjan's strongly connected components of more than one vertex."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
    return comps


def report(cycles):
    for comp in cycles:
        print(f"cycle of {len(comp)} files: " + ", ".join(comp))
        for f, inside in comp.items():
            print(f"  {f} -> {', '.join(inside)}")


# Synthetic crates: name -> (files, facades, the cycles expected, each a
# sorted list of files).
SELF_TESTS = {
    "a call through super:: closes a circle a use line opens": (
        {
            "lib.rs": "mod m;",
            "m/mod.rs": "mod p; mod q;",
            "m/p.rs": "pub fn f() -> u8 { super::q::g() }",
            "m/q.rs": "use super::p::f;\npub fn g() -> u8 { 1 }\npub fn h() -> u8 { f() }",
        },
        [],
        [["m/p.rs", "m/q.rs"]],
    ),
    "a crate:: path in a type and one in an expression": (
        {
            "lib.rs": "mod a;\nmod b;",
            "a.rs": "pub struct A;\npub fn take(_: &crate::b::B) {}",
            "b.rs": "pub struct B;\npub fn make() -> B { let _ = crate :: a :: A; B }",
        },
        [],
        [["a.rs", "b.rs"]],
    ),
    "self:: in a module's root and a child's path back to a sibling": (
        {
            "lib.rs": "mod m;",
            "m/mod.rs": "mod x;\nmod y;\npub fn run() { self::x::go() }",
            "m/x.rs": "pub fn go() { <crate::m::y::Y as Default>::default(); }",
            "m/y.rs": "#[derive(Default)] pub struct Y;\nimpl Y { pub fn back(self) { super::x::go() } }",
        },
        [],
        [["m/x.rs", "m/y.rs"]],
    ),
    "a path through a module a use line named, and a renamed one": (
        {
            "lib.rs": "mod a;\nmod b;\nmod c;",
            "a.rs": "use crate::b;\npub fn f() { b::g() }",
            "b.rs": "use crate::c as see;\npub fn g() { see::h() }",
            "c.rs": "use crate::{a::{self}};\npub fn h() { a::f() }",
        },
        [],
        [["a.rs", "b.rs", "c.rs"]],
    ),
    "grouped use lines and a parent's pub use of a sibling": (
        {
            "lib.rs": "mod k;\nmod z;",
            "k/mod.rs": "mod one;\npub use one::One;",
            "k/one.rs": "use crate::{z::{Z, Zed as Zz}};\npub struct One(Z, Zz);",
            "z.rs": "use crate::k::One;\npub struct Z;\npub struct Zed(Box<One>);",
        },
        [],
        [["k/one.rs", "z.rs"]],
    ),
    "a facade is not counted as a target": (
        {
            "lib.rs": "mod f;\nmod g;",
            "f.rs": "pub struct F;\npub fn run() { crate::g::go() }",
            "g.rs": "pub fn go() { let _ = crate::f::F; }",
        },
        ["f.rs"],
        [],
    ),
    "tests, comments, strings, ancestors and pub(in) are not uses": (
        {
            "lib.rs": "mod a;\nmod b;\npub struct Root;",
            "a.rs": (
                "pub fn f() -> u8 { crate::b::g() }\n"
                "pub(in crate::b) fn only() {}\n"
            ),
            "b.rs": (
                "/// See [`crate::a::f`]; // crate::a::f\n"
                "pub fn g() -> u8 { let _ = \"crate::a::f\"; let _ = r#\"super::a::f\"#; let _ = crate::Root; 2 }\n"
                "/* crate::a::f() */\n"
                "#[cfg(test)]\nmod tests { use crate::a::f; fn t() { super::super::a::f(); } }\n"
                "#[cfg(test)]\nfn helper() { crate::a::f(); }\n"
            ),
        },
        [],
        [],
    ),
    "external crates and a child of the same name elsewhere are not uses": (
        {
            "lib.rs": "mod a;\nmod b;",
            "a.rs": "pub fn f() { std::mem::drop(crate::b::G); }",
            "b.rs": "pub struct G;\npub fn g() { serde::de::ignore(); tokio::spawn(a::x()); }",
        },
        [],
        [],
    ),
}


def self_test():
    failed = 0
    for name, (files, facades, expected) in SELF_TESTS.items():
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text + "\n")
            found = [sorted(c) for c in Crate(root, facades).cycles()]
            if sorted(found) != sorted(expected):
                failed += 1
                print(f"FAIL {name}: expected {expected}, found {found}")
            else:
                print(f"ok   {name}")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print(__doc__)
        return 2
    facades = [argv[i + 1] for i, a in enumerate(argv) if a == "--facade" and i + 1 < len(argv)]
    cycles = Crate(argv[1], facades).cycles()
    report(cycles)
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
