#!/bin/sh
# test_plan_cli.sh: `dltrain plan` and `--parallel auto` (doc/planner.md).
# With FLOP-estimated layer times (--flops, --plan-flops), no tuning
# database and no calibration cache (an empty XDG_CACHE_HOME: the node's
# default parameters), everything below is reproducible:
# - --json parses, lists every layout, ranked ones first and in order of
#   predicted step time; a second run prints the same bytes;
# - a memory limit below every layout exits 2 with the smallest memory that
#   would work, which is the least memory of the layouts in the JSON; that
#   memory as the limit plans (exit 0) a layout within it;
# - with --tune-db, the layers dltrain tune timed take the database's
#   times (counted in the output), the others their FLOP estimates;
# - bad values of --link, --ranks, --memory-per-rank and a missing --link
#   for ranks across nodes exit 2 naming the option;
# - --parallel auto trains on 2 and 4 ranks with the layout it prints
#   (data parallel LeNet-5, a 2-stage pipeline and a 4-way tensor split of
#   the MLP) and ends with the same losses and bit-identical weights as the
#   run given those options explicitly (the pipeline's cuts as stage keys);
#   with --plan-trials 3 it times 3 layouts, trains the one it kept (the
#   same check) and says so when that is not the model's first.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
XDG_CACHE_HOME="$T/cache"
export XDG_CACHE_HOME
tap_plan 20

PLAN="$DLTRAIN plan --net $top_srcdir/nets/lenet5.yaml --flops 1e10 --no-db --threads 1"
$PLAN --ranks 4 --json > "$T/plan.json" 2> "$T/plan.err"
tap_result $? "plan --json on 4 ranks"
/usr/bin/python3 - "$T/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
L = p["layouts"]
grids = {(l["dp"], l["tp"], l["pp"]) for l in L}
want = {(d, t, 4 // (d * t)) for d in (1, 2, 4) for t in (1, 2, 4) if 4 % (d * t) == 0}
ranked = [l for l in L if l["feasible"]]
ok = p["ranks"] == 4 and grids == want and ranked and all(l["dp"] * l["tp"] * l["pp"] == 4 for l in L)
ok = ok and L[:len(ranked)] == ranked
ok = ok and all(a["step_s"] <= b["step_s"] for a, b in zip(ranked, ranked[1:]))
ok = ok and all(abs(l["samples_per_s"] * l["step_s"] - p["batch"]) < 1e-6 * p["batch"] for l in ranked)
ok = ok and all(len(l["cuts"]) == l["pp"] - 1 for l in ranked)
if not ok:
    print("# bad plan:", json.dumps(p)[:2000])
sys.exit(0 if ok else 1)
PY
tap_result $? "the JSON lists every grid of 4 ranks, ranked by predicted step time"
$PLAN --ranks 4 --json > "$T/plan2.json" 2>&1 && cmp -s "$T/plan.json" "$T/plan2.json"
tap_result $? "the same inputs give the same plan, byte for byte"

# The least memory any layout needs, from the JSON of a run with no limit.
least=$(/usr/bin/python3 -c '
import json, sys
print(min(l["memory_bytes"] for l in json.load(open(sys.argv[1]))["layouts"] if l["feasible"]))' "$T/plan.json")
expect_status 2 "a memory limit below every layout exits 2" -- $PLAN --ranks 4 --memory-per-rank 1000
expect_output "no layout of 4 ranks fits --memory-per-rank 1000: the smallest needs $least bytes per rank" \
    "and names the smallest memory that would work ($least bytes)"
expect_status 0 "that memory as the limit plans a layout" -- $PLAN --ranks 4 --memory-per-rank "$least" --json
echo "$OUT" | /usr/bin/python3 -c '
import json, sys
L = json.load(sys.stdin)["layouts"]
ok = L[0]["feasible"] and L[0]["memory_bytes"] <= int(sys.argv[1])
ok = ok and all(l["memory_bytes"] > int(sys.argv[1]) for l in L if not l["feasible"] and "memory_bytes" in l)
sys.exit(0 if ok else 1)' "$least"
tap_result $? "within the limit, the others over it"

# Layer times from the tuning database: the 11 layers dltrain tune timed
# at the batch a rank sees (32 of 64 on 2 ranks); the loss, which it does
# not tune, from its FLOPs.
$DLTRAIN tune --net "$top_srcdir/nets/lenet5.yaml" --batch 32 --tune-policy undivided --tune-db "$T/tune.sqlite" \
    --threads 1 > "$T/tune.txt" 2>&1
tap_result $? "dltrain tune fills a database"
expect_status 0 "plan with --tune-db" -- $DLTRAIN plan --net "$top_srcdir/nets/lenet5.yaml" --flops 1e10 --threads 1 \
    --ranks 2 --tune-db "$T/tune.sqlite"
expect_output "layer times at batch 32: 11 from the tuning database, 0 measured now, 1 FLOP estimates" \
    "takes the database's times for the 11 layers it has"

expect_status 2 "--link without bw exits 2" -- $PLAN --ranks 4 --link alpha=5us
expect_output "--link: expected both alpha= and bw=" "naming --link"
expect_status 2 "--ranks 0 exits 2" -- $PLAN --ranks 0
expect_status 2 "ranks across nodes without --link exit 2" -- $PLAN --ranks 16 --ranks-per-node 8
expect_output "--link: needed when the ranks span nodes \\(16 ranks, 8 per node\\)" "naming --link and the nodes"

skip_without_mpirun_rest() {
    [ -x "$(command -v mpirun)" ]
}
# auto NAME RANKS EXPECTED ARGS...: trains with --parallel auto, checks
# that it chose EXPECTED (its --grid option), then trains with the options
# it printed (and its cuts as stage keys in a copy of the file named by
# NET), and compares losses and weights exactly.
auto() {
    name=$1 n=$2 expected=$3
    shift 3
    timeout 300 mpirun --oversubscribe -np "$n" $DLTRAIN --net "$NET" "$@" --parallel auto --metrics "$T/$name-auto.jsonl" \
        --dump-weights "$T/$name-auto.bin" > "$T/$name-auto.txt" 2>&1 || { sed 's/^/#   /' "$T/$name-auto.txt" | head; return 1; }
    line=$(grep '^parallel auto: ' "$T/$name-auto.txt")
    echo "# $line" | cut -c1-160
    opts=$(echo "$line" | sed -n 's/^parallel auto: \(--grid [^ ]* --pipeline-chunks [0-9]* --pipeline-schedule [a-z0-9-]*\).*/\1/p')
    cuts=$(echo "$line" | sed -n 's/.*stages begin at \([^ ]*\) (predicted.*/\1/p')
    [ -n "$opts" ] || return 1
    cp "$NET" "$T/$name.yaml"
    s=1
    for layer in $(echo "$cuts" | tr '|' ' '); do
        sed -i "s/{name: $layer, /{name: $layer, stage: $s, /" "$T/$name.yaml"
        s=$((s + 1))
    done
    timeout 300 mpirun --oversubscribe -np "$n" $DLTRAIN --net "$T/$name.yaml" "$@" $opts --metrics "$T/$name-grid.jsonl" \
        --dump-weights "$T/$name-grid.bin" > "$T/$name-grid.txt" 2>&1 || { sed 's/^/#   /' "$T/$name-grid.txt" | head; return 1; }
    [ -z "$expected" ] || echo "$opts" | grep -q -- "$expected" || { echo "# expected $expected in: $opts"; return 1; }
    grep '"step"' "$T/$name-auto.jsonl" | sed 's/.*"loss": *\([^,}]*\).*/\1/' > "$T/$name-auto.loss"
    grep '"step"' "$T/$name-grid.jsonl" | sed 's/.*"loss": *\([^,}]*\).*/\1/' > "$T/$name-grid.loss"
    [ "$(wc -l < "$T/$name-auto.loss")" -ge 10 ] && cmp -s "$T/$name-auto.loss" "$T/$name-grid.loss" &&
        cmp -s "$T/$name-auto.bin" "$T/$name-grid.bin"
}
if skip_without_mpirun_rest; then
    NET=$top_srcdir/nets/lenet5.yaml
    LENET="--limit-train 640 --limit-test 100 --epochs 1 --threads 1 --quiet"
    auto lenet-dp2 2 "--grid dp=2,tp=1,pp=1" $LENET --plan-flops 1e9
    tap_result $? "--parallel auto on 2 ranks (LeNet-5: dp=2) equals the run with its options"
    NET=$top_srcdir/nets/mlp.yaml
    MLP="--limit-train 640 --limit-test 100 --epochs 1 --batch 32 --threads 1 --quiet"
    auto mlp-pp2 2 "--grid dp=1,tp=1,pp=2" $MLP --plan-flops 1e11
    tap_result $? "--parallel auto on 2 ranks (MLP: a 2-stage pipeline) equals the run with its options and cuts"
    auto mlp-tp4 4 "--grid dp=1,tp=4,pp=1" $MLP --plan-flops 1e11
    tap_result $? "--parallel auto on 4 ranks (MLP: tp=4) equals the run with its options"
    # Trials: the best 3 train 4 steps each; the one kept (timing decides
    # which) is the one printed last and trained.
    auto mlp-trials 2 "" $MLP --plan-flops 1e11 --plan-trials 3
    tap_result $? "--parallel auto --plan-trials 3 equals the run with the options it kept"
    f="$T/mlp-trials-auto.txt"
    timed=$(grep -c '^parallel auto timed: ' "$f")
    kept=$(grep '^parallel auto timed: .*(kept)$' "$f" | sed 's/^parallel auto timed: \(.*\): predicted.*/\1/')
    final=$(sed -n 's/^parallel auto: \(.*\) (predicted.*/\1/p' "$f")
    first=$(grep '^parallel auto timed: ' "$f" | head -1 | sed 's/^parallel auto timed: \(.*\): predicted.*/\1/')
    overruled=$(grep -c 'measurement overruled the model' "$f")
    if [ "$kept" = "$first" ]; then want_overruled=0; else want_overruled=1; fi
    [ "$timed" -eq 3 ] && [ -n "$kept" ] && [ "$kept" = "$final" ] && [ "$overruled" -eq "$want_overruled" ]
    tap_result $? "3 layouts timed, the kept one trained, and said when it is not the model's first ($kept)"
else
    for i in 1 2 3 4 5; do echo "ok $((tap_n + i)) # SKIP mpirun not available"; done
    tap_n=$((tap_n + 5))
fi
exit $((tap_failed > 0))
