#!/bin/sh
# test_layerwise.sh: the layerwise optimizers LARS, LAMB and Muon and the
# learning-rate scaling rules (issue 47).  On a small MLP, 20 full-batch
# steps of each (tests/torch_step steps: the trainer's no_decay runs and
# parameter tensors) against PyTorch implementations of the papers' rules
# (tests/layerwise_check.py) in float64: the weights within 4x PyTorch
# float32's distance, with biases left out by no_decay (ratio 1, no weight
# decay) and without (test_optim checks a first step by hand, a zero
# tensor's ratio 1 among it).  The
# trainer gives the optimizer every tensor (its notice counts them); LeNet-5
# on 4 data-parallel ranks equals one process for both, and on 2 pipeline
# ranks for lars; --lr-scaling linear
# and sqrt scale the rate (the metrics' lr) and say so, as check does; lamb
# resumed from a checkpoint continues bit for bit; bad
# input exits 2:
# a key no optimizer has, a key lars does not read, lr_scaling without a
# reference batch, lars with --zero or tensor parallelism.  Muon (its
# hidden layers' matrices orthogonalised, the rest on AdamW's step) the
# same way: against PyTorch in float64, LeNet-5's four matrices (the convs
# flattened), 4 ranks as one process, refused with --zero.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 35
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cat >"$T/mlp.yaml" <<'YAML'
name: mlp-small
input: {shape: [12], classes: 5}
layers:
  - {name: fc1, type: fc, units: 16}
  - {name: relu1, type: relu}
  - {name: fc2, type: fc, units: 16}
  - {name: relu2, type: relu}
  - {name: fc3, type: fc, units: 5}
loss: softmax_cross_entropy
train: {batch: 48, seed: 3}
YAML
PY=${DLTRAIN_VENV:-$HOME/.cache/dltrain/venv}/bin/python
[ -x "$PY" ] && "$PY" -c 'import numpy, torch' 2>/dev/null || PY=/usr/bin/python3
# torch_check KIND NODECAY KEY=VALUE...: the MLP with train.optimizer KIND
# and those keys (no_decay: bias or none) against layerwise_check.py's.
torch_check() {
    kind=$1 nd=$2
    shift 2
    net="$T/$kind-$nd.yaml" keys="type: $kind" args=""
    for kv in "$@"; do
        keys="$keys, ${kv%%=*}: ${kv#*=}"
    done
    [ "$nd" = bias ] && keys="$keys, no_decay: [bias]"
    sed "s/train: {batch: 48, seed: 3}/train: {batch: 48, seed: 3, optimizer: {$keys}}/" "$T/mlp.yaml" >"$net"
    mkdir -p "$T/$kind-$nd"
    "$PY" "$top_srcdir/tests/layerwise_check.py" "$net" "$T/$kind-$nd" "$top_builddir/tests/torch_step" 20 "$kind" \
        "$@" "no_decay=$nd" >"$T/$kind-$nd.log" 2>&1
    st=$?
    grep '^#' "$T/$kind-$nd.log"
    [ $st -ne 0 ] && grep -v '^#' "$T/$kind-$nd.log" | tail -5 | sed 's/^/#   /'
    return $st
}
if "$PY" -c 'import numpy, torch' 2>/dev/null; then
    LARS="lr=1.0 momentum=0.9 weight_decay=0.01 trust_coefficient=0.02"
    LAMB="lr=0.02 weight_decay=0.1 beta1=0.8 beta2=0.99 eps=1e-6"
    torch_check lars bias $LARS
    tap_result $? "lars, biases left out by no_decay: 20 steps as PyTorch float64 within 4x float32's distance"
    torch_check lars none $LARS
    tap_result $? "lars, every tensor adapted: as PyTorch"
    torch_check lamb bias $LAMB
    tap_result $? "lamb, biases left out by no_decay: 20 steps as PyTorch float64 within 4x float32's distance"
    torch_check lamb none $LAMB
    tap_result $? "lamb, every tensor adapted: as PyTorch"
    MUON="lr=0.02 momentum=0.9 weight_decay=0.1 beta1=0.8 beta2=0.99 eps=1e-6"
    torch_check muon bias $MUON
    tap_result $? "muon (fc1, fc2 orthogonalised; fc3 and the biases AdamW, biases undecayed): 20 steps as PyTorch"
    torch_check muon none $MUON
    tap_result $? "muon, every tensor decayed: as PyTorch"
else
    for i in 1 2 3 4 5 6; do echo "ok $i # SKIP no Python with numpy and torch"; done
    tap_n=6
fi

LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 64 --threads 1 --max-steps 20
       --set train.optimizer.no_decay=[bias] --weight-decay 0.0005"
LARS_CLI="--optimizer lars --lr 2 --momentum 0.9"
LAMB_CLI="--optimizer lamb --lr 0.01 --set train.optimizer.eps=1e-6" # eps 1e-8: 9e-6 apart, where sqrt(v) is
# about eps (conv1) and the ranks' sums' roundings of g are divided by it
expect_status 0 "LeNet-5 trains with lars" -- $DLTRAIN $LENET $LARS_CLI --max-steps 2 --quiet
expect_output "lars: a trust ratio for each of 10 parameter tensors \(5 left out by no_decay" \
    "  the trainer gives it LeNet-5's 10 tensors, 5 biases left out"

expect_status 0 "check shows lars's settings and the scaled rate" -- $DLTRAIN check $LENET $LARS_CLI \
    --lr-scaling sqrt --reference-batch 16
expect_output "train: lr_scaling sqrt, reference_batch 16 \(the base rate 4\)$" "  lr_scaling and reference_batch"
expect_output "type lars, lr 2, weight_decay 0.0005, no_decay \[bias\], momentum 0.9, trust_coefficient 0.001$" \
    "  lars's momentum and trust_coefficient"

C="--schedule constant --warmup-epochs 0 --batch 64 --max-steps 2"
lr_of() { /usr/bin/python3 -c 'import json, sys; print([json.loads(l)["lr"] for l in open(sys.argv[1]) if "\"step\"" in l][0])' "$1"; }
expect_status 0 "--lr-scaling linear" -- $DLTRAIN $LENET $C --lr 0.1 --lr-scaling linear --reference-batch 16 \
    --metrics "$T/linear.jsonl"
expect_output "lr scaling linear: lr 0.1 for reference batch 16, x 64/16 = 0.4 for batch 64" "  says so at the start"
[ "$(lr_of "$T/linear.jsonl")" = 0.4 ]
tap_result $? "  and the steps' rate is 0.1 x 64/16 = 0.4 (found $(lr_of "$T/linear.jsonl"))"
expect_status 0 "train.lr_scaling: sqrt in the file's keys" -- $DLTRAIN $LENET $C --lr 0.1 \
    --set train.lr_scaling=sqrt --set train.reference_batch=16 --metrics "$T/sqrt.jsonl"
[ "$(lr_of "$T/sqrt.jsonl")" = 0.2 ]
tap_result $? "  the steps' rate is 0.1 x sqrt(64/16) = 0.2 (found $(lr_of "$T/sqrt.jsonl"))"

sed 's/train: {batch: 48, seed: 3}/train: {batch: 48, seed: 3, lr_scaling: linear}/' "$T/mlp.yaml" >"$T/noref.yaml"
expect_status 2 "lr_scaling without a reference batch" -- $DLTRAIN check --net "$T/noref.yaml"
expect_output "noref.yaml:[0-9]+:[0-9]+: train.lr_scaling: linear scaling needs train.reference_batch" \
    "  located in the file, naming the key it needs"
expect_status 2 "--lr-scaling sqrt without --reference-batch" -- $DLTRAIN check $LENET --lr-scaling sqrt
sed 's/train: {batch: 48, seed: 3}/train: {batch: 48, seed: 3, optimizer: {type: lars, trust: 0.01}}/' \
    "$T/mlp.yaml" >"$T/badkey.yaml"
expect_status 2 "an unknown optimizer key" -- $DLTRAIN check --net "$T/badkey.yaml"
expect_output "badkey.yaml:[0-9]+:[0-9]+: train.optimizer: unknown key 'trust'.*trust_coefficient" \
    "  located, listing the keys (trust_coefficient among them)"
expect_status 2 "beta1 with lars from the command line" -- $DLTRAIN check $LENET $LARS_CLI \
    --set train.optimizer.beta1=0.8
expect_status 2 "lars with --zero 1" -- $DLTRAIN $LENET $LARS_CLI --zero 1 --max-steps 1
expect_output "lars: not with --zero 1 \(a rank's block of the weights cuts parameter tensors" "  saying why"
MUON_CLI="--optimizer muon --lr 0.01"
expect_status 0 "LeNet-5 trains with muon" -- $DLTRAIN $LENET $MUON_CLI --max-steps 2 --quiet
expect_output "muon: 4 weight matrices orthogonalised, 6 other parameter tensors on AdamW's step \(5 left out by no_decay" \
    "  conv1, conv2, fc1 and fc2's weights orthogonalised; the head and the biases on AdamW's step"
expect_status 2 "muon with --zero 3" -- $DLTRAIN $LENET $MUON_CLI --zero 3 --max-steps 1
expect_output "muon: not with --zero 3 \(a rank's block of the weights cuts parameter tensors, which Muon orthogonalises whole" \
    "  saying why"

R="$LENET $LAMB_CLI --quiet --schedule constant --warmup-epochs 0"
$DLTRAIN $R --dump-weights "$T/whole.bin" >/dev/null 2>&1 &&
    $DLTRAIN $R --max-steps 10 --checkpoint-dir "$T/ck" --checkpoint-every 10 >/dev/null 2>&1 &&
    $DLTRAIN $R --resume "$T/ck/ckpt-0000000010.safetensors" --dump-weights "$T/resumed.bin" >/dev/null 2>&1 &&
    cmp -s "$T/whole.bin" "$T/resumed.bin"
tap_result $? "lamb resumed at step 10 (its moments and step count checkpointed): the 20-step run bit for bit"

if command -v mpirun >/dev/null 2>&1; then
    run 1 lars1 $LENET $LARS_CLI && run 4 lars4 $LENET $LARS_CLI && compare lars-dp4 lars1 lars4
    tap_result $? "lars: LeNet-5 on 4 data-parallel ranks as one process (20 steps)"
    run 1 lamb1 $LENET $LAMB_CLI && run 4 lamb4 $LENET $LAMB_CLI && compare lamb-dp4 lamb1 lamb4
    tap_result $? "lamb: LeNet-5 on 4 data-parallel ranks as one process (20 steps)"
    run 2 lars-pp2 $LENET $LARS_CLI --grid pp=2 && compare lars-pp2 lars1 lars-pp2
    tap_result $? "lars: LeNet-5 on 2 pipeline ranks (each its stages' whole tensors) as one process"
    run 1 muon1 $LENET $MUON_CLI && run 4 muon4 $LENET $MUON_CLI && compare muon-dp4 muon1 muon4
    tap_result $? "muon: LeNet-5 on 4 data-parallel ranks as one process (20 steps)"
    expect_status 2 "lamb with tensor parallelism" -- \
        timeout 60 mpirun --oversubscribe -np 2 $DLTRAIN $LENET $LAMB_CLI --grid tp=2 --max-steps 1
    expect_output "lamb: not with tensor parallelism \(--grid tp=2" "  saying why"
else
    for i in 30 31 32 33 34 35; do echo "ok $i # SKIP mpirun not found"; done
fi
exit $((tap_failed > 0))
