#!/usr/bin/env python3
"""Fails on development narration in the docs and in Rust comments.

The project's text speaks to users and maintainers about what the code is
and does; the history of the work lives in git. This check reads every
tracked `*.md` file (every line, code blocks included) and the comments
(`//`, `///`, `//!`, `/* */`) of every tracked `*.rs` file, and reports
each phrase that narrates development:

- an issue number: `issue 20`, `Issue #20`, `issues 12 and 13`, `issue 19's`
  (a reference to upstream Alibaba Sentinel's tracker, `Sentinel issue 1638`,
  is a citation and passes);
- this session, stop, pass or run; an earlier or previous session or stop;
  a base, previous or this commit, this branch;
- first person with a verb of the work: `I measured`, `we tried`, `I've`;
- a dated run: `on 2026-11-01 we`, `run on 2026-11-01`;
- a former figure in brackets: `(was 25 ns)`;
- a numbered pass as a heading: `### A fifth pass`.

Ordinary English is not flagged: "the issue", "a pass", "runs in",
"its first pass", a date in a log line.

Usage: no_narration.py [FILE...]   (no FILE: every tracked *.md and *.rs
file of the repository this script sits in). Exit 1 on a finding, printing
`file:line: phrase` and the line; exit 0 otherwise.
`no_narration.py --self-test` checks the patterns on examples.
"""

import os
import re
import subprocess
import sys

# Verbs of the work, in the past: "we" also describes an algorithm in the
# present ("here we take the lock"), which is not narration.
PAST = (
    "measured|took|fixed|tried|found|ran|made|added|moved|changed|kept|saw|"
    "chose|removed|rewrote|timed|checked|built|profiled|cut|dropped|replaced|"
    "reverted|wrote|benchmarked|reran|re-ran|noticed|decided|settled|"
    "switched|reworked|landed|merged|measure|suspected"
)
ADVERBS = r"(\s+(\w+ly|then|also|first|again|now|once|never|only|just|finally))*"
# "I" is never the project's voice: its verbs of the work in any tense.
PRESENT = "measure|take|fix|try|run|suspect|believe|think|guess|expect|count"

PATTERNS = [
    (
        "issue number",
        re.compile(r"(?<!Sentinel )(?<!alibaba/Sentinel )\b[Ii]ssues?\s+#?\d+"),
    ),
    ("issue number", re.compile(r"\b[Ii]ssue\s*#\d+")),
    (
        "this session/stop/pass/run/commit/branch",
        re.compile(r"\b[Tt]his (session|stop|pass|run|commit|branch)\b"),
    ),
    (
        "an earlier session or stop",
        re.compile(
            r"\b(earlier|previous|last|next|later) "
            r"(session|stop)s?\b"
        ),
    ),
    ("a base or previous commit", re.compile(r"\b(base|previous|prior) commit\b")),
    (
        "first person",
        re.compile(r"\b[Ww]e" + ADVERBS + r"\s+(" + PAST + r")\b"),
    ),
    (
        "first person",
        re.compile(r"\bI" + ADVERBS + r"\s+(" + PAST + "|" + PRESENT + r")\b"),
    ),
    ("first person", re.compile(r"\b(I|[Ww]e)['\u2019](ve|d|m|ll)\b")),
    (
        "a dated run",
        re.compile(r"\b[Oo]n \d{4}-\d{2}-\d{2},? (I|we|the run|a run|it)\b"),
    ),
    (
        "a dated run",
        re.compile(r"\b(run|runs|measured|taken|timed) (on|of) \d{4}-\d{2}-\d{2}\b"),
    ),
    ("a former figure", re.compile(r"\((was|were) ~?\d[\d.,]*\s*\w*\)")),
    (
        "a numbered pass",
        re.compile(
            r"^#+ .*\b(second|third|fourth|fifth|sixth|seventh|eighth|"
            r"ninth|tenth|earlier|latest|previous|last) (pass|stop|session)\b",
            re.IGNORECASE,
        ),
    ),
]


def findings(text):
    """The narration phrases in one piece of text, as (reason, phrase)."""
    out = []
    for reason, pattern in PATTERNS:
        for m in pattern.finditer(text):
            out.append((reason, m.group(0)))
    return out


def rust_comments(source):
    """(line number, comment text) of every comment in a Rust source.

    A small lexer: strings (with escapes), raw strings, byte strings, char
    literals and lifetimes are skipped, so that `//` inside a string is not
    a comment; block comments nest.
    """
    out = []
    i, n, line = 0, len(source), 1
    while i < n:
        c = source[i]
        if c == "\n":
            line += 1
            i += 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append((line, source[i:end]))
            i = end
        elif source.startswith("/*", i):
            depth, j, start_line, buf = 1, i + 2, line, []
            start = i
            while j < n and depth:
                if source.startswith("/*", j):
                    depth += 1
                    j += 2
                elif source.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            for k, text in enumerate(source[start:j].split("\n")):
                buf.append((start_line + k, text))
            out.extend(buf)
            line += source.count("\n", start, j)
            i = j
        elif c == "r" and re.match(r'r#*"', source[i:i + 300]) and not (
            i and (source[i - 1].isalnum() or source[i - 1] == "_")
            and not (source[i - 1] == "b" and (i < 2 or not source[i - 2].isalnum()))
        ):
            hashes = re.match(r"r(#*)\"", source[i:]).group(1)
            close = '"' + hashes
            j = source.find(close, i + 2 + len(hashes))
            j = n if j < 0 else j + len(close)
            line += source.count("\n", i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            j += 1
            line += source.count("\n", i, j)
            i = j
        elif c == "'":
            if source.startswith("\\", i + 1):
                j = source.find("'", i + 2)
                i = n if j < 0 else j + 1
            elif i + 2 < n and source[i + 2] == "'":
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return out


def tracked_files(root):
    listed = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--", "*.md", "*.rs"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [os.path.join(root, p) for p in listed.split("\0") if p]


def check_file(path, shown):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if path.endswith(".rs"):
        pieces = rust_comments(text)
    else:
        pieces = list(enumerate(text.split("\n"), start=1))
    found = 0
    for line, piece in pieces:
        for reason, phrase in findings(piece):
            print(f"{shown}:{line}: {reason}: \"{phrase}\"\n    {piece.strip()}")
            found += 1
    return found


SHOULD_FLAG = [
    "Figures from issue 20's runs.",
    "as in issue #20",
    "Issue 21: caps never switch a rule off.",
    "issues 12 and 13 asked for it",
    "the cuts of this session",
    "this stop made the 429 cheaper",
    "in this pass the index moved",
    "p99 303 us in this run",
    "The tables below are an earlier session's.",
    "I measured 25 ns",
    "we measured it twice",
    "I took it for code layout",
    "I fixed the fence",
    "I tried a lock",
    "we then carefully measured",
    "I've kept it",
    "on 2026-11-01 we ran it",
    "runs on 2026-11-01 gave",
    "16.3 ns (was 25.7 ns)",
    "(was 40)",
    "### A fifth pass (a cleaned path)",
    "built from the base commit",
    "the previous commit's benches",
    "before this commit",
]

SHOULD_PASS = [
    "the issue is that the clock may go back",
    "a pass is counted once",
    "its first pass stores the reading",
    "the check runs in linear time",
    "runs in CI",
    "passes of the last minute",
    "2023-11-14 22:13:20|1|a,FlowException",
    "app-metrics.log.2024-01-31",
    "wait forever for it (Sentinel issue 1638).",
    "authority rule #1 on a",
    "a Sentinel feature we do not have",
    "our crate's version",
    "each run of the stress example",
    "a second pass over the list",
    "the session id of the page",
    "(was_blocked)",
    "the issuer",
]


def self_test():
    bad = 0
    for text in SHOULD_FLAG:
        if not findings(text):
            print(f"not flagged, should be: {text!r}")
            bad += 1
    for text in SHOULD_PASS:
        if findings(text):
            print(f"flagged, should not be: {text!r}: {findings(text)}")
            bad += 1
    src = (
        'let s = "// issue 20 in a string";\n'
        "let c = '\"'; // plain comment\n"
        "fn f<'a>(x: &'a str) {} // issue 21 here\n"
        'let r = r#"// issue 22 in a raw string"#;\n'
        'let b = br"\\"; // issue 24 after a raw byte string\n'
        "/* a block\n   issue 23 */\n"
    )
    got = [(line, findings(t)[0][1]) for line, t in rust_comments(src) if findings(t)]
    want = [(3, "issue 21"), (5, "issue 24"), (7, "issue 23")]
    if got != want:
        print(f"rust comments: got {got}, want {want}")
        bad += 1
    print("self-test:", "ok" if not bad else f"{bad} failure(s)")
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 1:
        files = [(p, p) for p in argv[1:]]
    else:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        files = [(p, os.path.relpath(p, root)) for p in tracked_files(root)]
    found = sum(check_file(path, shown) for path, shown in files if os.path.isfile(path))
    if found:
        print(
            f"\n{found} phrase(s) narrate development: state what the code is "
            "and does, in the present tense; git keeps the history."
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
