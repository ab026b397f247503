#!/bin/sh
# test_tune_defaults.sh: the kernel table measured on this CPU.  Without
# --tune, a layer that the tuning database holds measured (every candidate
# at the whole batch, on this CPU model, thread count and libraries) runs
# the kernel the database timed fastest; a layer measured only in part, a
# pick within the margin (5%, and 10 us a step), timings of another CPU or
# thread count, --tune-db none and an unreadable file leave the built-in
# table.  The database is filled by dltrain tune, then its times are set
# (Python's sqlite3) so that which kernel wins does not depend on this
# machine's noise.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
PY=/usr/bin/python3
NET="$top_srcdir/nets/lenet5.yaml"
DB="$T/db.sqlite"
DLTRAIN_TUNE_DB="$T/absent.sqlite" # the default database: none
export DLTRAIN_TUNE_DB
tap_plan 15

# fc1's kernel in `bench step` (its table: # layer type kernel ...)
fc1_kernel() {
    "$DLTRAIN" bench step --net "$NET" --batch 8 --threads "${THREADS:-1}" --steps 1 --warmup 0 "$@" 2> "$T/step.err" |
        awk '$2 == "fc1" { print $4 }'
}

# set_times FC1_OPENBLAS OTHERS: every measurement at batch 8 takes OTHERS
# seconds, fc1's openblas ones FC1_OPENBLAS.
set_times() {
    $PY - "$DB" "$1" "$2" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("update measurement_v2 set time_s = ? where mb = 8", (float(sys.argv[3]),))
db.execute("update measurement_v2 set time_s = ? where mb = 8 and kernel = 'openblas' and op like 'fc,units=120,%'",
           (float(sys.argv[2]),))
db.commit()
EOF
}

expect_status 0 "dltrain tune measures LeNet-5 at batch 8 on one thread" -- \
    "$DLTRAIN" tune --net "$NET" --batch 8 --threads 1 --repeats 1 --tune-policy undivided --tune-db "$DB"
BUILTIN=$(fc1_kernel --tune-db none)
[ -n "$BUILTIN" ] && [ "$BUILTIN" != openblas ] && [ "$(fc1_kernel)" = "$BUILTIN" ]
tap_result $? "--tune-db none and no database file give fc1 the built-in kernel ($BUILTIN)"

set_times 1e-6 1e-3
[ "$(fc1_kernel --tune-db "$DB")" = openblas ]
tap_result $? "a database where openblas wins fc1 by far gives it openblas"
expect_status 0 "train without --tune on that database" -- "$DLTRAIN" train --net "$NET" --dataset synthetic \
    --limit-train 64 --limit-test 16 --epochs 1 --batch 8 --threads 1 --tune-db "$DB"
expect_output "kernels: the tuning database's fastest on this CPU for 1 of 12 layers" \
    "and says how many layers the database moved (every other one is a tie)"
DLTRAIN_TUNE_DB="$DB" fc1_kernel > "$T/env.txt"
[ "$(cat "$T/env.txt")" = openblas ]
tap_result $? "DLTRAIN_TUNE_DB names the default database"

set_times 0.98e-3 1e-3
[ "$(fc1_kernel --tune-db "$DB")" = "$BUILTIN" ]
tap_result $? "a pick 2% faster stays on the built-in kernel (the margin)"
set_times 1e-6 4e-6
[ "$(fc1_kernel --tune-db "$DB")" = "$BUILTIN" ]
tap_result $? "a pick 9 us a step faster stays on the built-in kernel (the floor)"

set_times 1e-6 1e-3
[ "$(THREADS=2 fc1_kernel --tune-db "$DB")" = "$BUILTIN" ]
tap_result $? "timings on one thread are not used on two"
cp "$DB" "$T/other.sqlite"


# another generation under the same name (a virtual machine may show one
# name for two): the family differs
cp "$DB" "$T/other.sqlite"
$PY -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("update measurement_v2 set device = replace(device, \"(family \", \"(family 1\")"); db.commit()' "$T/other.sqlite"
[ "$(fc1_kernel --tune-db "$T/other.sqlite")" = "$BUILTIN" ]
tap_result $? "timings of another CPU family under the same name are not used"

$PY -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("delete from measurement_v2 where mb = 8 and direction = 1 and kernel = ? and op like ?", (sys.argv[2], "fc,units=120,%")); db.commit()' "$DB" "$BUILTIN"
[ "$(fc1_kernel --tune-db "$DB")" = "$BUILTIN" ]
tap_result $? "a layer measured only in part keeps the built-in kernel"

printf 'not a database\n' > "$T/bad.sqlite"
[ "$(fc1_kernel --tune-db "$T/bad.sqlite")" = "$BUILTIN" ]
tap_result $? "an unreadable database file leaves the built-in table"
expect_status 2 "--tune with --tune-db none exits 2" -- "$DLTRAIN" bench step --net "$NET" --batch 8 --threads 1 \
    --tune --tune-db none
expect_output "--tune-db none.*needs a database file" "and says why"
[ ! -e none ]
tap_result $? "and writes no file named none"
exit 0
