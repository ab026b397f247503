#!/bin/sh
# test_slurm.sh: a real one-node Slurm cluster on this machine (Debian's
# slurm-wlm and munge): munged, slurmctld and slurmd -N localhost with a
# slurm.conf of their own in a temporary folder.  Submits a 2-task job, then
# runs examples/slurm/preemptible.sh with a stand-in trainer through a
# preemption signal and a requeue, and, once dltrain has --resume, the same
# with real training, and examples/slurm/hybrid.sh on a tp=2 x pp=2 grid
# against one process.  Skipped (1..0 # SKIP) only where Slurm cannot start.
. "${top_srcdir:-.}/tests/tap.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root to start munged, slurmctld and slurmd"
for p in munged slurmctld slurmd sbatch scontrol sinfo setpriv; do
    command -v $p >/dev/null 2>&1 || skip "$p not found (Debian packages slurm-wlm and munge)"
done
id munge >/dev/null 2>&1 || skip "no munge user (Debian package munge)"

T=$(mktemp -d /tmp/dltrain-slurm.XXXXXX)
chmod 755 "$T"
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T" "$TMPDIR_TEST"
}
trap cleanup EXIT INT TERM

# ---------------------------------------------------------------- munge
mkdir -p "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chown -R munge:munge "$T/munge"
chmod 700 "$T/munge"
chmod 600 "$T/munge/munge.key"
SOCK="$T/munge/munge.socket"
setpriv --reuid=munge --regid=munge --clear-groups munged -F --force --socket="$SOCK" \
    --key-file="$T/munge/munge.key" --pid-file="$T/munge/munged.pid" \
    --log-file="$T/munge/munged.log" --seed-file="$T/munge/munged.seed" 2>"$T/munged.err" &
PIDS="$PIDS $!"

# ---------------------------------------------------------------- slurm
# Ports from the process id, so that parallel runs of this test do not clash.
P=$((20000 + ($$ % 4000) * 2))
mkdir -p "$T/state" "$T/spool"
export SLURM_CONF="$T/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=dltest$$
SlurmctldHost=localhost
SlurmctldPort=$P
SlurmdPort=$((P + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=5
MinJobAge=300
NodeName=localhost CPUs=4 State=UNKNOWN
SlurmdParameters=config_overrides
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
for i in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || skip "munged did not start: $(tail -3 "$T/munged.err" "$T/munge/munged.log" 2>/dev/null | tr '\n' ' ')"
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.err" 2>&1 &
PIDS="$PIDS $!"
slurmd -D -N localhost -f "$SLURM_CONF" >"$T/slurmd.err" 2>&1 &
PIDS="$PIDS $!"
state=""
for i in $(seq 100); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.2
done
[ "$state" = idle ] || skip "the Slurm node did not become idle (state '$state'): $(tail -3 "$T/slurmctld.log" "$T/slurmd.log" 2>/dev/null | tr '\n' ' ')"

# Slurm keeps a requeued job pending for a while (Reason=BeginTime, about two
# minutes); once the node is idle again, the test moves its start to now.
release_requeued() {
    for i in $(seq 100); do
        [ "$(restarts "$1")" = 1 ] && [ "$(job_state "$1")" = PENDING ] &&
            [ "$(sinfo -h -n localhost -o %T)" = idle ] && break
        sleep 0.2
    done
    sleep 1   # let slurmd forget the first attempt: a launch of the same job id too early fails
    scontrol update JobId="$1" StartTime=now
}
job_state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
restarts() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'; }
# wait_job ID SECONDS: until the job has COMPLETED (0) or failed/timed out (1).
wait_job() {
    n=$(($2 * 5))
    while [ $n -gt 0 ]; do
        case $(job_state "$1") in
        COMPLETED) return 0 ;;
        FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
            echo "# job $1 ended $(job_state "$1"): $(scontrol -o show job "$1" | grep -o 'Reason=[^ ]*\|Restarts=[^ ]*\|ExitCode=[^ ]*' | tr '\n' ' ')"
            return 1 ;;
        esac
        sleep 0.2; n=$((n - 1))
    done
    echo "# job $1 still $(job_state "$1") after $2 s: $(scontrol -o show job "$1" | grep -o 'Reason=[^ ]*\|BeginTime=[^ ]*\|Restarts=[^ ]*' | tr '\n' ' ')"
    sinfo -h -o '# node %n %T' 2>/dev/null
    return 1
}
with_resume=0
[ -x "$DLTRAIN" ] && "$DLTRAIN" train --help 2>&1 | grep -q -- --resume && with_resume=1
with_grid=0
[ -x "$DLTRAIN" ] && "$DLTRAIN" train --help 2>&1 | grep -q -- --grid && with_grid=1
tap_plan $((5 + 3 * with_resume + 4 * with_grid))

# ---------------------------------------------------------------- 1: a 2-task job
id=$(sbatch --parsable -n 2 -o "$T/hostname.out" --wrap 'srun hostname')
wait_job "$id" 60; tap_result $? "sbatch -n 2 --wrap 'srun hostname' completes"
[ "$(grep -c "^$(hostname)\$" "$T/hostname.out" 2>/dev/null)" -eq 2 ]
tap_result $? "both tasks ran ($(tr '\n' ' ' < "$T/hostname.out" 2>/dev/null))"

# ---------------------------------------------------------------- 2: preemption plumbing
# preemptible.sh with the stand-in trainer: USR1 to the tasks (what
# --signal=USR1@120 does at the time limit), exit 75, requeue, resume.
EX="$top_srcdir/examples/slurm/preemptible.sh"
mkdir -p "$T/fake"
id=$(cd "$T" && sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 -o "$T/fake.out" \
    --export=ALL,DLTRAIN="$top_srcdir/tests/fake_dltrain.sh",CKPT_DIR="$T/fake",FAKE_STEPS=40,FAKE_HOLD_AT=5 "$EX")
for i in $(seq 300); do [ "$(cat "$T/fake/step" 2>/dev/null || echo 0)" -ge 5 ] && break; sleep 0.1; done
scancel --signal=USR1 "$id"
release_requeued "$id"
wait_job "$id" 60; tap_result $? "the preemptible job completes after a USR1 and a requeue"
grep -q "exit 75" "$T/fake.out" && grep -q "requeueing job $id" "$T/fake.out"
tap_result $? "the tasks stopped with status 75 and the script requeued the job"
grep -q "attempt 2" "$T/fake.out" && grep -Eq "rank 0 starts at step [1-9]" "$T/fake.out" &&
    grep -q "rank 0 finished at step 40" "$T/fake.out"
tap_result $? "the requeued job resumed from the checkpoint and finished (restarts: $(restarts "$id"))"
[ $tap_failed -eq 0 ] || sed 's/^/#   /' "$T/fake.out"

# ---------------------------------------------------------------- 3: real training
if [ $with_resume -eq 1 ]; then
    NETF="$T/tiny.yaml"
    cat > "$NETF" <<NET
name: tiny
input: {shape: [1, 8, 8], classes: 4}
data: {dataset: synthetic, train_samples: 2048, test_samples: 64}
layers:
  - {name: conv1, type: conv, filters: 4, kernel: 3}
  - {type: relu}
  - {name: fc1, type: fc, units: 4}
loss: softmax_cross_entropy
train: {batch: 16, epochs: 4, seed: 3, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
NET
    mkdir -p "$T/real"
    # Every rank waits after step 40 (its checkpoint written) until the USR1
    # arrives, so the signal always finds the job training; the requeued run
    # resumes from step 41 and never waits again.
    id=$(cd "$T" && sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 -o "$T/real.out" \
        --export=ALL,DLTRAIN="$DLTRAIN",NET="$NETF",CKPT_DIR="$T/real",DLTRAIN_ARGS="--checkpoint-every 20 --log-every 1 --debug-hold-at-step 40" "$EX")
    for i in $(seq 600); do ls "$T/real" 2>/dev/null | grep -q 'ckpt-0*40\.safetensors$' && break; sleep 0.1; done
    scancel --signal=USR1 "$id"
    release_requeued "$id"
    wait_job "$id" 300; tap_result $? "real training: the preemptible job completes after USR1 and requeue"
    grep -q "requeueing job $id" "$T/real.out"; tap_result $? "real training: dltrain exited 75 after a checkpoint"
    grep -qi "resum" "$T/real.out" && grep -q "^final:" "$T/real.out"
    tap_result $? "real training: the requeued job resumed from the checkpoint and finished"
    [ $tap_failed -eq 0 ] || tail -30 "$T/real.out" | sed 's/^/#   /'
fi

# ---------------------------------------------------------------- 4: hybrid.sh, a 2 x 2 grid
# examples/slurm/hybrid.sh as a user submits it, the grid from the network
# file's parallel: section (tp=2, pp=2), 4 tasks on the node (slurm.conf
# declares 4 CPUs, config_overrides, so that they fit on 2 cores); its
# per-step losses must equal one process's.
if [ $with_grid -eq 1 ]; then
    cat > "$T/grid.yaml" <<NET
name: tiny-grid
input: {shape: [1, 8, 8], classes: 4}
data: {dataset: synthetic, train_samples: 320, test_samples: 64}
parallel: {strategy: hybrid, dp: 1, tp: 2, pp: 2}
layers:
  - {name: conv1, type: conv, filters: 4, kernel: 3}
  - {type: relu}
  - {name: fc1, type: fc, units: 4}
loss: softmax_cross_entropy
train: {batch: 16, epochs: 1, seed: 3, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
NET
    grep -v '^parallel:' "$T/grid.yaml" > "$T/one.yaml"
    id=$(cd "$T" && sbatch --parsable --nodes=1 --ntasks=4 --ntasks-per-node=4 --cpus-per-task=1 \
        -o "$T/hybrid.out" --export=ALL,DLTRAIN="$DLTRAIN",NET="$T/grid.yaml",DLTRAIN_ARGS="--metrics $T/grid.jsonl" \
        "$top_srcdir/examples/slurm/hybrid.sh")
    wait_job "$id" 300; tap_result $? "hybrid.sh: a tp=2 x pp=2 grid trains under srun"
    "$DLTRAIN" --net "$T/one.yaml" --threads 1 --quiet --metrics "$T/one.jsonl" >/dev/null 2>&1
    /usr/bin/python3 - "$T/grid.jsonl" "$T/one.jsonl" <<'PY'
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p) if '"step"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 20, (len(a), len(b))
rel = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print("# max relative loss difference %.3g over 20 steps" % rel)
sys.exit(0 if rel <= 1e-5 else 1)
PY
    tap_result $? "hybrid.sh: the grid's losses equal one process's"
    [ $tap_failed -eq 0 ] || tail -20 "$T/hybrid.out" | sed 's/^/#   /'
    # The same script on a network file without a grid: the planner's best
    # layout that splits two ways (--plan-flops: the same on any machine),
    # printed once; its losses equal one process's with the same chunks.
    id=$(cd "$T" && sbatch --parsable --nodes=1 --ntasks=4 --ntasks-per-node=4 --cpus-per-task=1 \
        -o "$T/planned.out" --export=ALL,DLTRAIN="$DLTRAIN",NET="$T/one.yaml",DLTRAIN_ARGS="--plan-flops 1e9 --metrics $T/planned.jsonl" \
        "$top_srcdir/examples/slurm/hybrid.sh")
    wait_job "$id" 300
    line=$(grep '^parallel hybrid: ' "$T/planned.out")
    echo "# $line" | cut -c1-120
    [ "$(grep -c '^parallel hybrid: ' "$T/planned.out")" -eq 1 ] &&
        echo "$line" | grep -Eq -- '--grid (dp=1,tp=[2-4],pp=[2-4]|dp=[2-4],tp=1,pp=[2-4]|dp=[2-4],tp=[2-4],pp=1) '
    tap_result $? "hybrid.sh without a grid: the planner's two-way layout, printed once"
    chunks=$(echo "$line" | sed -n 's/.* --pipeline-chunks \([0-9]*\) .*/\1/p')
    "$DLTRAIN" --net "$T/one.yaml" --threads 1 --quiet --pipeline-chunks "${chunks:-1}" --metrics "$T/one-c.jsonl" >/dev/null 2>&1
    /usr/bin/python3 - "$T/planned.jsonl" "$T/one-c.jsonl" <<'PY'
import json, sys
def losses(p):
    return [json.loads(l)["loss"] for l in open(p) if '"step"' in l]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 20, (len(a), len(b))
rel = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print("# max relative loss difference %.3g over 20 steps" % rel)
sys.exit(0 if rel <= 1e-5 else 1)
PY
    tap_result $? "hybrid.sh without a grid: its losses equal one process's"
    [ $tap_failed -eq 0 ] || tail -20 "$T/planned.out" | sed 's/^/#   /'
fi
[ $tap_failed -eq 0 ]
