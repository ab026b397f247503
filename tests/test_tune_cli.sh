#!/bin/sh
# test_tune_cli.sh: the tuner's commands: dltrain tune fills a database and a
# second run measures nothing; several processes tuning at once into one
# database all succeed and leave it complete; dltrain bench conv on one
# shape (table and CSV); training with --tune; bad option values.
. "$top_srcdir/tests/tap.sh"
DL="$top_builddir/dltrain"
T="$TMPDIR_TEST"
NET="$top_srcdir/nets/lenet5.yaml"
export OMP_NUM_THREADS=1
tap_plan 9

"$DL" tune --net "$NET" --batch 4 --threads 1 --repeats 1 --tune-db "$T/db.sqlite" > "$T/cold.txt" 2>&1
tap_result $? "cold dltrain tune"
grep -q '^conv1 .*fwd' "$T/cold.txt" && grep -q 'measured' "$T/cold.txt"
tap_result $? "the plan names the layers and directions"
"$DL" tune --net "$NET" --batch 4 --threads 1 --tune-db "$T/db.sqlite" > "$T/warm.txt" 2>&1
grep -q 'candidates: 0 measured' "$T/warm.txt"
tap_result $? "a warm database measures nothing"

# four processes on a fresh database at once (batch 2: other keys)
for i in 1 2 3 4; do
    "$DL" tune --net "$NET" --batch 2 --threads 1 --repeats 1 --tune-db "$T/shared.sqlite" > "$T/p$i.txt" 2>&1 &
done
fails=0
wait
for i in 1 2 3 4; do grep -q '^total:' "$T/p$i.txt" || fails=$((fails + 1)); done
tap_result $fails "4 concurrent processes sharing one database"
measured=$(cat "$T"/p?.txt | sed -n 's/^candidates: \([0-9]*\) measured.*/\1/p' | awk '{s += $1} END {print s}')
"$DL" tune --net "$NET" --batch 2 --threads 1 --tune-db "$T/shared.sqlite" --no-measure > "$T/after.txt" 2>&1
grep -q 'candidates: 0 measured' "$T/after.txt" && [ "$measured" -gt 0 ]
tap_result $? "after them the database is complete ($measured measured in all)"

"$DL" bench conv --shape 2,3,8,8,4,3,3,1,1 --threads 1 --repeats 1 --tune-db "$T/db.sqlite" > "$T/conv.txt" 2>&1 &&
    grep -q 'geometric-mean speedup' "$T/conv.txt"
tap_result $? "bench conv --shape"
"$DL" bench conv --shape 2,3,8,8,4,3,3,1,1 --threads 1 --tune-db "$T/db.sqlite" --no-measure --csv > "$T/conv.csv" 2>/dev/null &&
    head -1 "$T/conv.csv" | grep -q '^name,n,c,h,w,k,r,s' && [ "$(wc -l < "$T/conv.csv")" -eq 2 ]
tap_result $? "bench conv --csv"

"$DL" train --net "$NET" --dataset synthetic --limit-train 64 --limit-test 16 --epochs 1 --batch 8 --threads 1 \
    --tune --tune-policy all --workspace-limit 1M --tune-db "$T/db.sqlite" > "$T/train.txt" 2>&1
tap_result $? "train --tune"

"$DL" tune --net "$NET" --workspace-limit 12X > "$T/bad.txt" 2>&1
st=$?
"$DL" tune --net "$NET" --tune-policy some >> "$T/bad.txt" 2>&1
st2=$?
[ $st -eq 2 ] && [ $st2 -eq 2 ] && grep -q 'workspace-limit' "$T/bad.txt" && grep -q 'tune-policy' "$T/bad.txt"
tap_result $? "bad --workspace-limit and --tune-policy values exit 2 naming the option"
