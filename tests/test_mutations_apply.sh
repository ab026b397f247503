#!/bin/sh
# test_mutations_apply.sh: every patch under tests/mutations/ still applies
# to the tree (git apply --check), so that tools/mutate can show each test
# bites; a patch whose lines moved must be remade (doc/testing.md).  Skipped
# outside a git checkout.
. "${top_srcdir:-.}/tests/tap.sh"
cd "$top_srcdir" || exit 1
if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "1..0 # SKIP not a git checkout"
    exit 0
fi
tap_plan 1
n=0 bad=0
for p in tests/mutations/*.patch; do
    n=$((n + 1))
    if ! git apply --check "$p" 2>/dev/null; then
        echo "# does not apply: $p"
        bad=$((bad + 1))
    fi
done
[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
tap_result $? "all $n mutation patches apply ($bad do not)"
