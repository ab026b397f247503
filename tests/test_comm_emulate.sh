#!/bin/sh
# test_comm_emulate.sh: --comm-emulate alpha=TIME,bw=RATE (comm/emulate.c),
# the emulated slower network.  Its delays are lower bounds, so no timing
# here can fail by the machine being slow: an allreduce under the emulation
# takes at least its algorithm's alpha-beta cost (bench comm on 4 ranks:
# ring and native 2(p-1)(alpha + m/(p bw)), recursive doubling
# log2(p)(alpha + m/bw), the all-to-all (p-1)(alpha + m/(p bw)); unemulated they take a millisecond, a hundred
# under heavy load, the bounds are 0.9 and 1.1 s, so that a delay half as
# long as it should be fails too), and two steps of a data-parallel run take at least
# the four 0.25-second messages of their two ring allreduces.  Training with
# the wrapper gives bit-identical losses and weights to training without it
# (data parallel, and a tensor x pipeline grid: isend, collectives, splits).
# Bad values exit 2 naming the option.
. "$top_srcdir/tests/tap.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 15

for v in alpha=20 bw=1GB alpha=5ms,alpha=1ms speed=1GB/s alpha=-1us; do
    expect_status 2 "dltrain --comm-emulate $v exits 2" -- $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --comm-emulate "$v"
    expect_output "--comm-emulate" "  the message names the option"
done
expect_status 2 "bench comm --comm-emulate bw=0GB/s exits 2" -- $DLTRAIN bench comm --comm-emulate bw=0GB/s

# bench comm: each algorithm's median time against its emulated cost.
timeout 120 mpirun --oversubscribe -np 4 $DLTRAIN bench comm --comm-emulate alpha=20ms,bw=2MB/s --sizes 1M \
    --algorithms ring,recursive_doubling,native --repeat 3 --alltoall --csv > "$T/bench.csv" 2> "$T/bench.err"
/usr/bin/python3 - "$T/bench.csv" <<'PY'
import sys
alpha, bw, p, m = 20e-3, 2e6, 4, 1048576.0
bound = {"ring": 2 * (p - 1) * (alpha + m / p / bw), "native": 2 * (p - 1) * (alpha + m / p / bw),
         "recursive_doubling": 2 * (alpha + m / bw)}
lines = [l.split(",") for l in open(sys.argv[1]) if l[0].isdigit()]
rows = [r for r in lines if r[2] in bound]  # not the gossip rows
seen = {r[2]: float(r[3]) * 1e-6 for r in rows}
bound["alltoall"] = (p - 1) * (alpha + m / p / bw)  # a quarter of the vector to each other rank
seen.update({"alltoall": float(r[2]) * 1e-6 for r in lines if r[1] == "alltoall"})
ok = sorted(seen) == sorted(bound)
for a, t in sorted(seen.items()):
    print("# %-20s %8.2f ms, emulated cost %8.2f ms" % (a, t * 1e3, bound[a] * 1e3))
    ok = ok and t >= bound[a]
sys.exit(0 if ok else 1)
PY
tap_result $? "bench comm: ring, recursive doubling and native allreduce, and the all-to-all, take at least their emulated cost"

# Two data-parallel steps pay at least their ring allreduces' messages:
# 2 steps x 2(p-1) = 4 messages of 0.25 s each on 2 ranks (more come on top:
# the initial broadcast, the metrics' sums).
LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet"
timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --max-steps 2 --allreduce ring --comm-emulate alpha=250ms \
    --metrics "$T/slow.jsonl" > "$T/slow.txt" 2>&1
st=$?
# the epoch's seconds (its steps, not the start-up of mpirun and the processes)
secs=$(grep '"event":"epoch"' "$T/slow.jsonl" 2>/dev/null | sed 's/.*"seconds":\([0-9.e+-]*\).*/\1/')
echo "# 2 steps under alpha=250ms: epoch of ${secs:-?} s (status $st)"
[ $st -eq 0 ] && [ -n "$secs" ] && [ "$(echo "$secs >= 1" | bc)" -eq 1 ]
tap_result $? "training's allreduces are delayed: 2 steps on 2 ranks take at least 4 x alpha"

# same NAME RANKS ARGS...: the run with and without the emulation, the same bits.
same() {
    name=$1 n=$2
    shift 2
    for e in plain emulated; do
        extra=""
        [ $e = emulated ] && extra="--comm-emulate alpha=50us,bw=1GB/s"
        timeout 180 mpirun --oversubscribe -np "$n" $DLTRAIN "$@" $extra --metrics "$T/$name-$e.jsonl" \
            --dump-weights "$T/$name-$e.bin" > "$T/$name-$e.txt" 2>&1 || { sed 's/^/#   /' "$T/$name-$e.txt" | head; return 1; }
    done
    grep -o '"loss":[^,]*' "$T/$name-plain.jsonl" > "$T/$name-plain.loss"
    grep -o '"loss":[^,]*' "$T/$name-emulated.jsonl" > "$T/$name-emulated.loss"
    echo "# $name: $(wc -l < "$T/$name-plain.loss") losses"
    [ "$(wc -l < "$T/$name-plain.loss")" -ge 20 ] && cmp "$T/$name-plain.loss" "$T/$name-emulated.loss" &&
        cmp "$T/$name-plain.bin" "$T/$name-emulated.bin"
}
same dp2 2 $LENET
tap_result $? "data parallel on 2 ranks: the same losses and weights, bit for bit, with and without the emulation"
same tp2-pp2 4 $LENET --grid tp=2,pp=2 --pipeline-chunks 4
tap_result $? "tp=2,pp=2 on 4 ranks: the same losses and weights, bit for bit, with and without the emulation"
