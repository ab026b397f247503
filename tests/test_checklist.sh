#!/bin/sh
# test_checklist.sh: what doc/ARCHITECTURE.md's "Adding things" checklists
# mark as checked: every op kind of src/ops/kinds.h is printed by `dltrain
# help layers`, gradient-checked in a tests/test_grad_*.c and documented in
# dltrain-net(5); every communication backend --comm names has its row in
# doc/comm.md; every consistency model --consistency names is described in
# doc/ARCHITECTURE.md and dltrain(1).
. "$top_srcdir/tests/tap.sh"
S="$top_srcdir"
tap_plan 6

syms=$(sed -n 's/^ *DL_OP(\(dl_op_[a-z0-9_]*\)).*/\1/p' "$S/src/ops/kinds.h")
names=$("$DLTRAIN" help layers | sed -n 's/^\([a-z0-9_]*\): .*/\1/p')
ns=$(echo "$syms" | wc -w); nn=$(echo "$names" | wc -w)
[ "$ns" -gt 0 ] && [ "$ns" -eq "$nn" ]; tap_result $? "dltrain help layers prints every op kind of kinds.h ($nn of $ns)"

missing=""
for s in $syms; do
    grep -q "\b$s\b" "$S"/tests/test_grad_*.c || missing="$missing $s"
done
[ -z "$missing" ]; tap_result $? "every op kind has a gradient check in tests/test_grad_*.c${missing:+ (missing:$missing)}"

missing=""
for n in $names; do
    grep -qx "\.SS $n" "$S/man/dltrain-net.5" || missing="$missing $n"
done
[ -z "$missing" ]; tap_result $? "every op kind has its section in dltrain-net(5)${missing:+ (missing:$missing)}"

# The backends and models the CLI accepts, from its own error messages.
backends=$("$DLTRAIN" --net "$S/nets/lenet5.yaml" --comm '?' 2>&1 | sed -n 's/.*(expected \(.*\)).*/\1/p' | sed 's/,\| or / /g')
missing=""
for b in $backends; do
    [ "$b" = auto ] && continue
    grep -q "^| \`$b\`" "$S/doc/comm.md" || missing="$missing $b"
done
[ -n "$backends" ] && [ -z "$missing" ]; tap_result $? "every --comm backend ($(echo $backends)) has its row in doc/comm.md${missing:+ (missing:$missing)}"

models=$("$DLTRAIN" --net "$S/nets/lenet5.yaml" --consistency '?' 2>&1 | sed -n 's/.*expected \(.*\), found.*/\1/p' | sed 's/,\| or / /g; s/:[A-Z]*//g; s/\[[^]]*\]//g')
missing=""
for m in $models; do
    grep -q -- "$m" "$S/doc/ARCHITECTURE.md" || missing="$missing ARCHITECTURE.md:$m"
    grep -q -- "$(echo "$m" | sed 's/-/\\\\-/g')" "$S/man/dltrain.1" || missing="$missing dltrain.1:$m"
done
[ -n "$models" ] && [ -z "$missing" ]; tap_result $? "every --consistency model ($(echo $models)) is described${missing:+ (missing:$missing)}"

# and the checklist itself names this test, so whoever edits one sees the other
grep -q "test_checklist.sh" "$S/doc/ARCHITECTURE.md"; tap_result $? "doc/ARCHITECTURE.md points to this test"
