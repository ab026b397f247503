#!/bin/sh
# test_check_memory.sh: dltrain check --grid's memory per rank against what
# real runs plan.  Every rank of a training run reports its executors' arena
# bytes, slots, parameters and optimizer state (metrics "memory" lines,
# gathered to rank 0); check's row for that rank's (t, p) position must give
# the same numbers, byte for byte: LeNet-5 on tp=2,pp=2 (1f1b), a small
# ResNet (batch-norm state) on dp=2,pp=2 with gpipe, the MLP on
# interleaved:2 over pp=2 (two stages per rank), one process against
# --grid dp=1, and data parallelism on 2 ranks against --grid dp=2.  And
# the fully connected layers shrink by T: on AlexNet at 63x63, check's
# params/rank of each fc layer on tp=2 and tp=4 is its weight matrix divided
# by T plus its bias (whole on rank 0 for a row split, divided for a column
# split).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/grid_runs.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 9

# same CHECK-OUTPUT METRICS: every rank's memory line against check's row.
same() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, re, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 12 and f[0].isdigit() and f[1].isdigit():
        rows[(int(f[0]), int(f[1]))] = dict(zip(["execs", "params", "gradients", "optimizer", "state", "arena"],
                                                 map(int, [f[5], f[6], f[7], f[8], f[9], f[10]])))
mem = [json.loads(l) for l in open(sys.argv[2]) if '"memory"' in l]
ok = len(mem) > 0
for m in mem:
    r = rows.get((int(m["t"]), int(m["p"])))
    want = {"execs": m["slots"], "params": 4 * m["weights"], "gradients": 4 * m["weights"],
            "optimizer": 4 * m["optimizer_state"], "state": 4 * m["state"], "arena": m["arena_bytes"]}
    good = r is not None and all(r[k] == want[k] for k in want)
    print("# rank %d (t=%d p=%d): run %s, check %s%s" % (m["rank"], m["t"], m["p"], want, r, "" if good else "  DIFFERS"))
    ok = ok and good
sys.exit(0 if ok else 1)
PY
}

# check_and_run NAME RANKS CHECK-ARGS -- RUN-ARGS: check's table and a 2-step run's memory lines.
check_and_run() {
    name=$1 n=$2
    shift 2
    cargs=""
    while [ "$1" != "--" ]; do cargs="$cargs $1"; shift; done
    shift
    $DLTRAIN check --bytes $cargs > "$T/$name.check" 2>&1 || { sed 's/^/#   /' "$T/$name.check" | tail -5; return 1; }
    if [ "$n" -eq 1 ]; then
        $DLTRAIN "$@" --max-steps 2 --metrics "$T/$name.jsonl" > "$T/$name.txt" 2>&1
    else
        timeout 180 mpirun --oversubscribe -np "$n" $DLTRAIN "$@" --max-steps 2 --metrics "$T/$name.jsonl" \
            > "$T/$name.txt" 2>&1
    fi || { sed 's/^/#   /' "$T/$name.txt" | tail -5; return 1; }
    same "$T/$name.check" "$T/$name.jsonl"
}

LENET="--net $top_srcdir/nets/lenet5.yaml --threads 1"
check_and_run lenet 4 $LENET --grid tp=2,pp=2 -- $LENET --grid tp=2,pp=2 --limit-train 640 --limit-test 64 --quiet
tap_result $? "LeNet-5 tp=2,pp=2 (1f1b, 8 chunks): check's memory per rank equals the run's"

small_resnet "$T/resnet.yaml"
RESNET="--net $T/resnet.yaml --threads 1"
check_and_run resnet 4 $RESNET --grid pp=2 --ranks 4 --pipeline-schedule gpipe --pipeline-chunks 4 -- \
    $RESNET --grid dp=2,pp=2 --pipeline-schedule gpipe --pipeline-chunks 4 --quiet
tap_result $? "small ResNet dp=2,pp=2 (gpipe, 4 chunks, batch norm): check --ranks 4 equals the run"

MLP="--net $top_srcdir/nets/mlp.yaml --threads 1 --batch 32"
check_and_run mlp 2 $MLP --grid pp=2 --pipeline-schedule interleaved:2 -- \
    $MLP --grid pp=2 --pipeline-schedule interleaved:2 --limit-train 640 --limit-test 64 --quiet
tap_result $? "MLP pp=2 interleaved:2 (two stages per rank): check equals the run"

check_and_run one 1 $LENET --grid dp=1 -- $LENET --limit-train 640 --limit-test 64 --quiet
tap_result $? "one process: check --grid dp=1 equals the run"
check_and_run dp2 2 $LENET --grid dp=2 -- $LENET --limit-train 640 --limit-test 64 --quiet
tap_result $? "data parallel on 2 ranks: check --grid dp=2 equals the run"

# AlexNet's fc layers on tp=T: weights / T, plus the bias.
sed -e 's/shape: \[3, 224, 224\], classes: 1000/shape: [3, 63, 63], classes: 10/' -e 's/units: 1000/units: 10/' \
    "$top_srcdir/nets/alexnet.yaml" > "$T/alexnet.yaml"
for tp in 2 4; do
    $DLTRAIN check --bytes --net "$T/alexnet.yaml" --grid tp=$tp > "$T/alex$tp.check" 2>&1
    /usr/bin/python3 - "$T/alex$tp.check" "$tp" <<'PY'
import sys
T = int(sys.argv[2])
lines = open(sys.argv[1]).read().split("\n")
whole, units, rank0 = {}, {}, {}
part = 0
for l in lines:
    f = l.split()
    if l.startswith("grid "):
        part = 1
    if len(f) >= 6 and f[0].isdigit() and part == 0 and f[2] == "fc":
        whole[f[1]] = int(f[-2])
        units[f[1]] = int(f[-4].split("x")[0]) if "x" in f[-4] else int(f[-4])
    elif len(f) >= 4 and f[0].isdigit() and part == 1 and f[1] in whole:
        rank0[f[1]] = int(f[-1])
ok = len(whole) == 3 and sorted(rank0) == sorted(whole)
for name in sorted(whole):
    w, u = whole[name] - units[name], units[name]
    r = rank0.get(name, -1)
    good = r in (w // T + u // T, w // T + u) and w % T == 0
    print("# tp=%d %s: %d parameters whole (%d weights), %d on tensor rank 0%s" % (T, name, whole[name], w, r,
          "" if good else "  NOT weights/T + bias"))
    ok = ok and good
sys.exit(0 if ok else 1)
PY
    tap_result $? "AlexNet at 63x63, tp=$tp: every fc layer holds its weights / $tp (and its bias) per rank"
done
# and the memory table says so: the tp=4 row's parameter bytes are below tp=2's, below one rank's
/usr/bin/python3 - "$T/alex2.check" "$T/alex4.check" <<'PY'
import sys
def params(path):
    return max(int(l.split()[6]) for l in open(path) if len(l.split()) == 12 and l.split()[0].isdigit())
p2, p4 = params(sys.argv[1]), params(sys.argv[2])
print("# largest rank's parameter bytes: tp=2 %d, tp=4 %d" % (p2, p4))
sys.exit(0 if p4 < p2 else 1)
PY
tap_result $? "AlexNet: a tp=4 rank holds fewer parameter bytes than a tp=2 rank"

expect_status 2 "check --grid tp=2 --ranks 3 exits 2" -- $DLTRAIN check --net "$top_srcdir/nets/lenet5.yaml" --grid tp=2 --ranks 3
