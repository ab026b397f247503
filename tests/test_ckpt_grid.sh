#!/bin/sh
# test_ckpt_grid.sh: checkpoints across grids and data-parallel strategies,
# each against an exact counterpart.  A tp=2 x pp=2 grid stopped by SIGUSR1
# writes the file one process writes (NumPy reads both: same tensors, the
# weights and momentum buffers within 1e-5 of the largest of their kind,
# the RNG states equal); its checkpoint resumes on pp=4, on dp=4 and on one
# process, and one process's on dp=2 x tp=2, each continuing the
# uninterrupted one-process run (losses within 1e-5 relative, weights within
# 1e-5 of the largest, the grid tests' tolerances).  A stop signal sent to
# one rank of the grid stops them all at one step.  Adam's two slots on a
# pure pipeline, bit for bit.  The small ResNet (batch
# norm running statistics split by channels) the same way.  Local SGD: a
# stop waits for the next average, and the resumed run equals the
# uninterrupted one bit for bit; what a checkpoint cannot hold (per-rank
# optimizer state under local SGD, --compress's residuals) exits 2.
. "$top_srcdir/tests/tap.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 34

. "$top_srcdir/tests/grid_runs.sh"

# st_compare A B META [TOL]: the safetensors files T/A and T/B parsed with
# NumPy (header, data checksum with zlib) hold the same tensors, names,
# dtypes and shapes; floats within TOL (default 1e-5) of the largest of
# their kind (the parameters and state, or one optimizer slot), other
# dtypes equal; B's metadata has every KEY=VALUE of META (comma-separated).
st_compare() {
    /usr/bin/python3 - "$T/$1" "$T/$2" "$3" "${4:-1e-5}" <<'PY'
import json, struct, sys, zlib
import numpy as np
def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__")
    assert meta["dltrain.data_crc32"] == "crc32:%08x" % zlib.crc32(data), path + ": checksum"
    dtypes = {"F32": np.float32, "U64": np.uint64, "I64": np.int64}
    return meta, {k: (v["dtype"], np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]],
                                                dtype=dtypes[v["dtype"]]).reshape(v["shape"]))
                  for k, v in header.items()}
(_, a), (meta, b) = load(sys.argv[1]), load(sys.argv[2])
want = dict(kv.split("=") for kv in sys.argv[3].split(","))
bad = ["%s=%s (expected %s)" % (k, meta.get(k), v) for k, v in want.items() if meta.get(k) != v]
if sorted(a) != sorted(b):
    bad.append("tensors differ: %s" % sorted(set(a) ^ set(b)))
kinds = {}
for name in sorted(set(a) & set(b)):
    (da, x), (db, y) = a[name], b[name]
    if da != db or x.shape != y.shape:
        bad.append("%s: %s %s against %s %s" % (name, db, y.shape, da, x.shape))
    elif da != "F32":
        if not np.array_equal(x, y):
            bad.append(name + " differs")
    else:
        kind = name.rsplit(".", 1)[1] if name.startswith("optim.") else "parameters"
        k = kinds.setdefault(kind, [0.0, 0.0])
        k[0] = max(k[0], float(np.max(np.abs(x - y))))
        k[1] = max(k[1], float(np.max(np.abs(x))))
for kind, (diff, top) in sorted(kinds.items()):
    print("# %s: max difference %.2g of the largest %.3g" % (kind, diff / top, top))
    if top == 0 or diff > float(sys.argv[4]) * top:
        bad.append("%s differ by %.2g of the largest" % (kind, diff / top))
print("# %d tensors; %s" % (len(b), "; ".join(bad) if bad else "metadata " + sys.argv[3]))
sys.exit(1 if bad else 0)
PY
}

# resumed NAME REF: the losses of T/NAME (a resumed run: its steps only)
# within 1e-5 relative of T/REF's at the same global steps, and its final
# weights within 1e-5 of the largest.
resumed() {
    /usr/bin/python3 - "$T/$1" "$T/$2" <<'PY'
import json, sys
import numpy as np
run, ref = sys.argv[1:3]
def losses(f):
    return {r["global_step"]: r["loss"] for r in map(json.loads, open(f + ".jsonl")) if r["event"] == "step"}
a, b = losses(ref), losses(run)
if not b or max(b) != max(a) or any(s not in a for s in b):
    print("# steps %s of %s against %d" % (sorted(b)[:3], len(b), len(a)))
    sys.exit(1)
rel = max(abs(b[s] - a[s]) / abs(a[s]) for s in b)
x, y = np.fromfile(ref + ".bin", dtype=np.float32), np.fromfile(run + ".bin", dtype=np.float32)
wd = np.max(np.abs(x - y)) / np.max(np.abs(x)) if x.size == y.size else 1
print("# steps %d..%d: max relative loss difference %.2g, weights %.2g" % (min(b), max(b), rel, wd))
sys.exit(0 if rel <= 1e-5 and wd <= 1e-5 else 1)
PY
}

# newest DIR: the step of the newest checkpoint in T/DIR.
newest() {
    ls "$T/$1" 2>/dev/null | sort | tail -1 | sed 's/ckpt-0*\([0-9]*\)\.safetensors/\1/'
}

# stopped NAME RANKS HOLD ARGS...: a run on RANKS ranks held at step HOLD
# and stopped there by SIGUSR1 (metrics T/NAME.jsonl, output T/NAME.txt);
# $st is its exit status.
stopped() {
    name=$1 n=$2 hold=$3
    shift 3
    mpirun --oversubscribe -np "$n" $DLTRAIN "$@" --metrics "$T/$name.jsonl" \
        --debug-hold-at-step "$hold" > "$T/$name.txt" 2>&1 &
    pid=$!
    stop_after "$T/$name.jsonl" "$hold" USR1 $pid
    wait $pid; st=$?
}

ckpt() { echo "$T/$1/ckpt-$(printf %010d "$2").safetensors"; }

# signal_rank R SIGNAL PID: sends SIGNAL to MPI rank R alone among the
# processes below PID (mpirun, or a command that started it).
signal_rank() {
    for c in $(ps -o pid= --ppid "$3") $(for c in $(ps -o pid= --ppid "$3"); do ps -o pid= --ppid "$c"; done); do
        tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && kill -"$2" "$c"
    done
}

# ---- LeNet-5: saved on tp=2 x pp=2, resumed on other grids.  Reference
# kernels: the fast ones compute the weight gradients of a tensor rank's 3
# filters of conv1 otherwise than of all 6, and the momentum buffers (sums
# of gradients) at step 5 differ by 8.7e-5 of the largest (measured; the
# weights by 7e-7); with the reference kernels by 2.3e-7.
LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet
    --pipeline-chunks 4 --kernel all=reference"
run 1 one $LENET --checkpoint-dir "$T/one" --checkpoint-every 5
tap_result $? "LeNet-5 on one process, 4 chunks, a checkpoint every 5 steps"

stopped grid 4 8 $LENET --grid tp=2,pp=2 --checkpoint-dir "$T/grid" --checkpoint-every 5
last=$(newest grid)
[ $st -eq 75 ] && [ "$last" = 9 ] && [ -f "$(ckpt grid 5)" ]
tap_result $? "tp=2 x pp=2: SIGUSR1 stops every rank after step 9 with a checkpoint (status $st, newest $last)"
grep -q "stopped by a signal after step 9: checkpoint" "$T/grid.txt"; tap_result $? "rank 0 says where it is"
st_compare one/ckpt-0000000005.safetensors grid/ckpt-0000000005.safetensors "step=5,dp=1,tp=2,pp=2,world_size=4"
tap_result $? "the grid's file at step 5 is one process's: same tensors, values within 1e-5, tp=2 pp=2 in its metadata"

run 4 on-pp4 $LENET --grid pp=4 --resume="$(ckpt grid 9)" && resumed on-pp4 one
tap_result $? "the tp=2 x pp=2 checkpoint resumes on pp=4 as the uninterrupted one-process run"
run 4 on-dp4 $LENET --grid dp=4 --resume="$(ckpt grid 9)" && resumed on-dp4 one
tap_result $? "... on dp=4"
grep -q "written by 4 ranks" "$T/on-dp4.txt"; tap_result $? "the resume names the layout that wrote it"
run 1 on-one $LENET --resume="$(ckpt grid 9)" && resumed on-one one
tap_result $? "... on one process"
run 4 one-on-dp2-tp2 $LENET --grid dp=2,tp=2 --resume="$(ckpt one 10)" && resumed one-on-dp2-tp2 one
tap_result $? "one process's checkpoint resumes on dp=2 x tp=2"

# ---- a stop signal that reaches one rank only (rank 3: tensor rank 1 of
# the last stage) stops every rank at the same step, where they gather a
# checkpoint: the flag travels with the step's sums over the grid.  The run
# has 200 steps of at least 0.3 s (rank 0 sleeps), so it cannot finish
# before the signal arrives, and stops long before step 20, which the
# comparison with the one-process run needs (over 40 steps at a constant
# learning rate the weights drift apart by 4e-5 through rounding, measured;
# over 20, by 1e-7); a rank stopping alone would leave the others waiting.
CONST="$LENET --schedule constant"
run 1 const $CONST; tap_result $? "LeNet-5 at a constant learning rate on one process"
timeout -s KILL 150 mpirun --oversubscribe -np 4 $DLTRAIN $CONST --epochs 10 --grid tp=2,pp=2 \
    --debug-slow-rank 0:300 --checkpoint-dir "$T/one-rank" --metrics "$T/one-rank.jsonl" > "$T/one-rank.txt" 2>&1 &
pid=$!
wait_steps "$T/one-rank.jsonl" 2
signal_rank 3 USR1 $pid
wait $pid; st=$?
last=$(newest one-rank)
[ $st -eq 75 ] && [ -n "$last" ] && grep -q "stopped by a signal after step $last: checkpoint" "$T/one-rank.txt"
tap_result $? "SIGUSR1 to rank 3 alone stops every rank at one step after a checkpoint (status $st, step ${last:-none})"
run 1 one-rank-resumed $CONST --resume="$(ckpt one-rank "${last:-0}")" && resumed one-rank-resumed const
tap_result $? "that checkpoint resumes on one process as the uninterrupted run"

# ---- Adam (two slots) on pp=2: a pure pipeline computes one process's
# numbers bit for bit, so the files and the resumed run are equal exactly
ADAM="--net $top_srcdir/nets/lenet5.yaml --limit-train 640 --limit-test 100 --epochs 1 --threads 1 --quiet
    --pipeline-chunks 4 --optimizer adam --lr 0.001"
run 1 adam-one $ADAM --checkpoint-dir "$T/aone" --checkpoint-every 5; tap_result $? "Adam on one process"
run 2 adam-pp2 $ADAM --grid pp=2 --checkpoint-dir "$T/app2" --checkpoint-every 5 &&
    st_compare aone/ckpt-0000000005.safetensors app2/ckpt-0000000005.safetensors "step=5,pp=2" 0
tap_result $? "Adam on pp=2: the file at step 5 equals one process's, exp_avg and exp_avg_sq included"
run 2 adam-on-pp2 $ADAM --grid pp=2 --resume="$(ckpt aone 5)" && cmp -s "$T/adam-one.bin" "$T/adam-on-pp2.bin"
tap_result $? "one process's Adam checkpoint resumes on pp=2 to the same final weights, bit for bit"

# ---- the small ResNet: batch-norm running statistics split by channels
small_resnet "$T/resnet.yaml"
RESNET="--net $T/resnet.yaml --threads 1 --quiet --kernel all=reference --pipeline-chunks 4"
run 1 resnet-one $RESNET --checkpoint-dir "$T/rone" --checkpoint-every 10
tap_result $? "small ResNet on one process, a checkpoint every 10 steps"
grid resnet-grid resnet-one 4 $RESNET --grid tp=2,pp=2 --checkpoint-dir "$T/rgrid" --checkpoint-every 10
st_compare rone/ckpt-0000000010.safetensors rgrid/ckpt-0000000010.safetensors "step=10,tp=2,pp=2"
tap_result $? "small ResNet: the tp=2 x pp=2 grid's file at step 10 is one process's"
run 1 resnet-on-one $RESNET --resume="$(ckpt rgrid 10)" && resumed resnet-on-one resnet-one
tap_result $? "small ResNet: it resumes on one process as the uninterrupted run"
# A checkpoint written before batch norm's num_batches_tracked existed:
# the grid's step-10 file without those tensors (its checksum made anew)
# resumes as the uninterrupted run, the counts starting again from 0:
# 4 chunks a step, 10 steps more at step 20.
/usr/bin/python3 - "$(ckpt rgrid 10)" "$T/old-format.safetensors" <<'PY'
import json, struct, sys, zlib
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = header.pop("__metadata__")
kept, blobs, at = {}, [], 0
for name, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    if name.endswith(".num_batches_tracked"):
        continue
    b, e = v["data_offsets"]
    kept[name] = dict(v, data_offsets=[at, at + e - b])
    blobs.append(data[b:e])
    at += e - b
body = b"".join(blobs)
meta["dltrain.data_crc32"] = "crc32:%08x" % zlib.crc32(body)
h = json.dumps(dict(kept, __metadata__=meta)).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + body)
print("# %d tensors kept, %d num_batches_tracked left out" % (len(kept), len(header) - len(kept)))
PY
run 1 resnet-old-format $RESNET --resume="$T/old-format.safetensors" --checkpoint-dir "$T/rold" --checkpoint-every 10 &&
    resumed resnet-old-format resnet-one
tap_result $? "small ResNet: a checkpoint without num_batches_tracked resumes as the uninterrupted run"
/usr/bin/python3 - "$(ckpt rold 20)" "$(ckpt rone 10)" <<'PY'
import json, struct, sys
import numpy as np
def counters(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    h, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    return {k: int(np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], np.int64)[0])
            for k, v in h.items() if k.endswith("num_batches_tracked")}
old, ten = counters(sys.argv[1]), counters(sys.argv[2])
print("# %d counters: %s at step 10 of the uninterrupted run, %s at step 20 of the resumed one"
      % (len(old), sorted(set(ten.values())), sorted(set(old.values()))))
sys.exit(0 if old and set(ten.values()) == {40} and set(old.values()) == {40} and set(old) == set(ten) else 1)
PY
tap_result $? "  its counts start from 0: 40 (10 steps of 4 chunks) at step 20, as the first run's at step 10"
# 2 chunks of each data-parallel rank's 16 samples: the samples of one
# process's 4 chunks, so the same batch-norm statistics
run 4 resnet-on-dp2-pp2 $RESNET --grid dp=2,pp=2 --pipeline-chunks 2 --resume="$(ckpt rgrid 10)" &&
    resumed resnet-on-dp2-pp2 resnet-one
tap_result $? "small ResNet: ... on dp=2 x pp=2 (2 chunks per rank)"

# ---- local SGD: checkpoints at averages only; resume equals the uninterrupted run
LSGD="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet
    --consistency local-sgd:4 --momentum 0"
run 2 lsgd $LSGD; tap_result $? "local-sgd:4 on 2 ranks, uninterrupted"
stopped lsgd-stop 2 5 $LSGD --checkpoint-dir "$T/lsgd"
last=$(newest lsgd)
[ $st -eq 75 ] && [ "$last" = 8 ]
tap_result $? "SIGUSR1 after step 5 stops at the next average, step 8, with a checkpoint (status $st, newest $last)"
grep -q "stopped by a signal after step 8: checkpoint" "$T/lsgd-stop.txt"; tap_result $? "rank 0 says so"
[ "$(ls "$T/lsgd" | wc -l)" -eq 1 ]; tap_result $? "no checkpoint between averages"
run 2 lsgd-resumed $LSGD --resume="$(ckpt lsgd 8)"
tap_result $? "the local SGD checkpoint resumes on 2 ranks"
/usr/bin/python3 - "$T/lsgd" "$T/lsgd-resumed" <<'PY'
import json, sys
a, b = ({r["global_step"]: r["loss"] for r in map(json.loads, open(f + ".jsonl")) if r["event"] == "step"}
        for f in sys.argv[1:3])
print("# resumed steps %d..%d against the uninterrupted run" % (min(b), max(b)))
sys.exit(0 if min(b) == 9 and max(b) == max(a) and all(b[s] == a[s] for s in b) else 1)
PY
tap_result $? "its losses equal the uninterrupted run's, bit for bit"
cmp -s "$T/lsgd.bin" "$T/lsgd-resumed.bin"; tap_result $? "and so do its final weights"

MPI2="mpirun --oversubscribe -np 2"
L1="--net $top_srcdir/nets/lenet5.yaml --limit-train 640 --limit-test 100 --epochs 1 --threads 1 --quiet"
expect_status 2 "local SGD with momentum and --checkpoint-dir is refused" -- $MPI2 $DLTRAIN $L1 \
    --consistency local-sgd:4 --checkpoint-dir "$T/refused"
expect_output "--checkpoint-dir with --consistency local-sgd:4 and --optimizer sgd \(momentum 0.9\)" \
    "the message names the options and the optimizer's state"
expect_status 2 "--compress with --resume is refused" -- $MPI2 $DLTRAIN $L1 --compress topk:1 \
    --resume="$(ckpt lsgd 8)"
expect_output "--resume with --compress topk: the codec's error-feedback residuals" "the message names the options"
[ ! -d "$T/refused" ]; tap_result $? "a refused run creates no checkpoint folder"
[ $tap_failed -eq 0 ]
