#!/usr/bin/env bash
# Tests .ci/no_narration.py: its patterns on examples (--self-test), a
# phrase planted in a temp copy of the README is found at its line, and the
# tracked tree passes.
set -euo pipefail
cd "$(dirname "$0")/.."
check=.ci/no_narration.py

python3 "$check" --self-test

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp README.md "$tmp/README.md"
printf '\nThe figures below are issue 20'"'"'s runs.\n' >> "$tmp/README.md"
planted=$(wc -l < "$tmp/README.md")
if out=$(python3 "$check" "$tmp/README.md"); then
  echo "FAIL: a planted \"issue 20's runs\" passed the check" >&2
  exit 1
fi
if ! grep -q "^$tmp/README.md:$planted: issue number: \"issue 20\"" <<<"$out"; then
  echo "FAIL: the planted phrase was not reported at line $planted:" >&2
  echo "$out" >&2
  exit 1
fi
echo "planted phrase found at README.md:$planted"

python3 "$check"
echo "the tracked tree has no narration"
