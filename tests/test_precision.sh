#!/bin/sh
# test_precision.sh: --precision bf16 (train.precision) as a user runs it.
# check shows each output's dtype in the run (bf16 for the convolutions and
# fully connected layers, f32 for the loss) and the casts; fp16 and a
# --kernel choice without a bf16 version are refused by name; the run's
# first lines say which kernel computes in bf16; a batch norm's ReLU folds
# into its bf16 kernel (bench step shows it fused, and its share of the
# measured bf16 GEMM peak); GPT's attention computes in bf16.  LeNet-5 on Fashion-MNIST
# for three epochs in bf16 ends within half a point of fp32's test accuracy; a
# tuned bf16 run with micro-batches (the executor's bf16 tensors sliced
# into parts) and runs on 2 data-parallel and 2 pipeline ranks equal one
# process's bf16 run (losses and weights within 1e-5); 2 tensor-parallel
# ranks (their partial sums in f32) within bf16's rounding, 2^-8, also
# for attention with dropout cut by heads.
# --grad-dtype bf16 on 2 data-parallel ranks sends half the bytes of fp32
# buckets, its losses within 2^-8 of theirs; it is refused with a codec
# and off sync, and other dtypes are refused.  The
# arithmetic itself is compared with PyTorch's bf16 autocast in
# test_torch.sh.  --precision auto times a step in both precisions and
# takes the faster (fp32 on an AVX2-only oneDNN; not native on an AVX-512
# one without bf16, as on an Ice Lake; said once on 2 ranks); --precision
# bf16 on an AVX2-only oneDNN warns with the measured times and trains.
. "$top_srcdir/tests/tap.sh"
skip_without_mpirun
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HOME="$T"
tap_plan 42
NET="--net $top_srcdir/nets/lenet5.yaml"

expect_status 0 "check --precision bf16" -- $DLTRAIN check $NET --precision bf16
expect_output "^0 +conv1 +conv +input +6x28x28 +bf16 " "  conv1's output is stored in bf16"
expect_output "^6 +fc1 +fc .* bf16 " "  fc1's output is stored in bf16"
expect_output "^11 +loss +softmax_cross_entropy .* f32 " "  the loss computes in f32"
expect_output "^precision bf16: (5|11) of 12 layers compute in bf16 \(.*(reference|onednn)-bf16.*, ([1-9][0-9]*) casts between dtypes" \
    "  the fc and convolution layers (and the others where oneDNN has bf16) in bf16, and the casts counted"
BF16_CHECK="$STDOUT"
expect_status 0 "train.precision in the file is the same setting" -- \
    $DLTRAIN check $NET --set train.precision=bf16
[ "$STDOUT" = "$BF16_CHECK" ]
tap_result $? "  the same report as --precision bf16"
expect_status 2 "--precision fp16 is refused" -- $DLTRAIN check $NET --precision fp16
expect_output "--precision fp16: train.precision: expected one of fp32, bf16, auto, found 'fp16'" "  naming the accepted values"
# (conv1 where oneDNN's f32 kernel runs it; on AVX2 CPUs its one input channel has none, so conv2)
expect_status 2 "a --kernel choice with no bf16 version is refused under bf16" -- \
    $DLTRAIN check $NET --precision bf16 --kernel conv=onednn
expect_output "layer 'conv[12]' \(conv\) computes in bf16 under --precision bf16, and kernel 'onednn' has no bf16 version" \
    "  naming the layer and the kernel"

# GPT's attention computes in bf16 where oneDNN has bf16 matmuls (its
# products on bf16 q, k, v with f32 sums, as autocast's bmm), so its input
# and output need no casts; elsewhere it stays f32 between casts.
. "$top_srcdir/tests/text_corpus.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
expect_status 0 "check gpt-tiny --precision bf16" -- \
    $DLTRAIN check --net $top_srcdir/nets/gpt-tiny.yaml --data "$top_builddir/tests/text-corpus" --precision bf16
if echo "$OUT" | grep -Eq "^precision bf16: .*onednn-bf16"; then
    echo "$OUT" | grep -Ec "^[0-9]+ +h\.[01]\.attn\.attn +attention .* bf16 " | grep -qx 2
    tap_result $? "  both attention layers compute in bf16 (onednn-bf16)"
else
    tap_result 0 "  both attention layers compute in bf16 (onednn-bf16) # SKIP no oneDNN bf16 on this CPU"
fi

# Batch norm's ReLU folds into its bf16 kernel as into the f32 one (where
# oneDNN's bf16 batch norm runs: AVX-512 CPUs; elsewhere the emulated path
# keeps the ReLU layer).
expect_status 0 "bench step --precision bf16 on ResNet-18" -- \
    $DLTRAIN bench step --net resnet18 --batch 1 --steps 1 --warmup 0 --precision bf16
if echo "$OUT" | grep -Eq "^1 +bn1 +batchnorm +onednn-bf16 "; then
    echo "$OUT" | grep -Eq "^2 +relu +relu +fused "
    tap_result $? "  the ReLU after each batch norm is fused into it"
    # the achieved rate as a share of the measured bf16 GEMM peak (oneDNN's JIT matmul)
    echo "$OUT" | awk '/^achieved: / { a = $2 }
        /^bf16 GEMM peak: [0-9.]+ GFLOP\/s \(oneDNN matmul [a-z]+.*share [0-9.]+%$/ {
            p = $4; s = $NF; sub("%", "", s); n++ }
        END { exit !(n == 1 && p > 0 && a > 0 && (100 * a / p - s) ^ 2 < 0.01) }'
    tap_result $? "  and the achieved GFLOP/s as a share of the measured bf16 GEMM peak"
else
    tap_result 0 "  the ReLU after each batch norm is fused into it # SKIP no oneDNN bf16 batch norm on this CPU"
    tap_result 0 "  and the achieved GFLOP/s as a share of the measured bf16 GEMM peak # SKIP likewise"
fi

# Three epochs each way (issue 29): the test accuracies within half a point.
$DLTRAIN train $NET --epochs 3 --precision fp32 > "$T/fp32.txt" 2>&1 &&
    $DLTRAIN train $NET --epochs 3 --precision bf16 > "$T/bf16.txt" 2>&1
st=$?
grep -Eq "^  precision bf16: 5 of 12 layers \(the fc and convolution ones\) compute in bf16 \(.*(reference|onednn)-bf16" "$T/bf16.txt" || st=1
if grep -q "reference-bf16" "$T/bf16.txt"; then # the emulated path says so, once
    [ "$(grep -c "warning: --precision bf16 emulates bf16 on some layers" "$T/bf16.txt")" -eq 1 ] || st=1
fi
a=$(sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$T/fp32.txt")
b=$(sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$T/bf16.txt")
echo "# LeNet-5, three epochs: test accuracy fp32 $a%, bf16 $b%"
[ $st -eq 0 ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 80 && d <= 0.5) }'
tap_result $? "LeNet-5, three epochs in bf16 (the run says so): test accuracy within half a point of fp32's"

BF="$NET --precision bf16 --max-steps 30 --limit-test 200 --threads 1"
run 1 serial $BF
tap_result $? "LeNet-5, 30 steps in bf16 on one process"
$DLTRAIN tune $NET --precision bf16 --batch 64 --workspace-limit 256K --tune-policy all --tune-db "$T/tune.sqlite" \
    > "$T/tune.txt" 2>&1
grep -Eq "^conv1 +conv +fwd +reference-bf16 [0-9]+x[0-9]+ *(\+|[0-9])" "$T/tune.txt" &&
    grep -Eq "reference-bf16 [0-9]+x([2-9]|[1-9][0-9]+)" "$T/tune.txt" &&
    run 1 tuned $BF --tune --workspace-limit 256K --tune-policy all --tune-db "$T/tune.sqlite" &&
    compare tuned serial tuned
tap_result $? "micro-batched by the tuner (bf16 tensors cut into parts): as the undivided run"
grid dp2 serial 2 $BF --grid dp=2
grid pp2 serial 2 $BF --grid pp=2
# near_bf16 REF RUN STEPS [W]: every step's loss of T/RUN within 2^-8 relative of T/REF's
# (and, given W, the final weights within W of the largest).
near_bf16() {
    /usr/bin/python3 - "$T" "$1" "$2" "$3" "${4:-inf}" <<'PY'
import json, sys
import numpy as np
a, b = ([json.loads(l)["loss"] for l in open("%s/%s.jsonl" % (sys.argv[1], n)) if '"step"' in l] for n in sys.argv[2:4])
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
x, y = (np.fromfile("%s/%s.bin" % (sys.argv[1], n), np.float32) for n in sys.argv[2:4])
wd = np.max(np.abs(x - y)) / np.max(np.abs(x)) if x.size == y.size else float("inf")
print("# %s: %d steps, max relative loss difference %.2g, weights %.2g" % (sys.argv[3], len(b), rel, wd))
sys.exit(0 if len(a) == len(b) == int(sys.argv[4]) and rel <= 2.0 ** -8 and wd <= float(sys.argv[5]) else 1)
PY
}
run 2 tp2 $BF --grid tp=2 && near_bf16 serial tp2 30
tap_result $? "tp2: within bf16's rounding of one process (its partial sums in f32)"
# attention in bf16 with dropout, cut by heads on 2 tensor ranks (each draws
# the whole layer's masks for its heads): the weights within 2^-9 (measured
# 2.7e-4; 5.1e-3 when the ranks draw their heads' masks as heads 0 and 1)
cat > "$T/attn.yaml" <<'YAML'
name: bf16-attention
input: {shape: [16], dtype: i32, classes: 256}
data: {dataset: text}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 32, init_std: 0.02}
  - {name: qkv, type: fc, units: 96}
  - {name: attn, type: attention, heads: 4, dropout: 0.2}
  - {name: proj, type: fc, units: 32}
  - {name: add1, type: add, inputs: [proj, wte]}
  - {name: head, type: fc, units: 256}
loss: softmax_cross_entropy
train: {batch: 8, epochs: 1, seed: 3, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
YAML
ATTN="--net $T/attn.yaml --data $top_builddir/tests/text-corpus --precision bf16 --threads 1 --max-steps 20 --limit-test 32"
run 1 attn-one $ATTN && run 2 attn-tp2 $ATTN --grid tp=2 && near_bf16 attn-one attn-tp2 20 0.001953125
tap_result $? "attention with dropout in bf16 on tp2 (by heads): within bf16's rounding of one process"

# bf16 gradient buckets: half the bytes, the same training within bf16's rounding
FP="$NET --max-steps 30 --limit-test 200 --threads 1"
run 2 g32 $FP && run 2 g16 $FP --grad-dtype bf16 && /usr/bin/python3 - "$T" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open("%s/%s.jsonl" % (sys.argv[1], n)) if '"step"' in l] for n in ("g32", "g16"))
s32, s16 = sum(x["bytes_sent"] for x in a), sum(x["bytes_sent"] for x in b)
rel = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
print("# --grad-dtype bf16: %d bytes sent against %d in fp32 (%.3f), max relative loss difference %.2g"
      % (s16, s32, s16 / s32, rel))
sys.exit(0 if len(a) == len(b) == 30 and abs(s16 / s32 - 0.5) < 0.01 and 0 < rel <= 2.0 ** -8 else 1)
PY
tap_result $? "--grad-dtype bf16 on 2 ranks: half the bytes, losses within 2^-8 of fp32 buckets'"
expect_status 2 "--grad-dtype bf16 with --compress is refused" -- \
    mpirun --oversubscribe -np 2 $DLTRAIN $FP --grad-dtype bf16 --compress topk:0.01
expect_status 2 "--grad-dtype fp16 is refused" -- $DLTRAIN $FP --grad-dtype fp16

# --precision auto: the precision whose step (16 samples, forward and
# backward) this machine ran faster, timed in both.  On an AVX2-only oneDNN
# (no native bf16: the reference bf16 code, several times slower) fp32.
AVX2="env ONEDNN_MAX_CPU_ISA=AVX2"
AUTO_LINE='precision auto: (fp32|bf16) \(a step of 16 samples took ([0-9.]+) ms in bf16, ([0-9.]+) ms in fp32 on this machine: (native bf16|no native bf16 \(AVX512-BF16 or AMX\))\)'
# auto_agrees PRECISION: the auto line of $STDOUT picks the faster of its
# times, and the settings line says the same precision.
auto_agrees() {
    echo "$STDOUT" | awk -v set="$1" '
        /precision auto: / { n++; pick = $3; b = $10; f = $14; if (pick != ((b + 0 < f + 0) ? "bf16" : "fp32")) bad = 1 }
        /^  train: / { train = $0 }
        END { exit !(n == 1 && !bad && index(train, "precision " pick ",") && (set == "" || pick == set)) }'
}
expect_status 0 "check --precision auto on an AVX2-only CPU" -- $AVX2 $DLTRAIN check $NET --precision auto
expect_output "$AUTO_LINE" "  says what it timed"
expect_output "precision auto: fp32 .*no native bf16" "  picks fp32 there"
auto_agrees fp32
tap_result $? "  the faster of the times it printed, and the settings say fp32"
expect_status 0 "check --precision auto as on an Ice Lake (AVX-512, no native bf16)" -- \
    env ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI $DLTRAIN check $NET --precision auto
expect_output "precision auto: .*: no native bf16 \\(AVX512-BF16 or AMX\\)\\)" "  oneDNN's emulated bf16 is not native"
auto_agrees ""
tap_result $? "  the faster of the times it printed, as the settings say"
expect_status 0 "check --precision auto on this CPU" -- $DLTRAIN check $NET --precision auto
auto_agrees ""
tap_result $? "  picks the faster of the times it printed, as the settings say"
expect_status 2 "--precision fp8 is refused" -- $DLTRAIN check $NET --precision fp8
expect_output "train.precision: expected one of fp32, bf16, auto, found 'fp8'" "  naming auto among the values"

# --precision bf16 on a CPU without native bf16 says how much slower it
# measured, and still trains.
expect_status 0 "--precision bf16 on an AVX2-only CPU trains" -- \
    $AVX2 $DLTRAIN $NET --precision bf16 --max-steps 2 --limit-test 64 --threads 1
echo "$STDERR" | grep -Eq "^dltrain: warning: --precision bf16 on a CPU with no native bf16 \(AVX512-BF16 or AMX\): a step of 16 samples took [0-9.]+ ms in bf16 against [0-9.]+ ms in fp32 on this machine, [0-9.]+x slower; --precision auto picks the faster$"
tap_result $? "  warning on stderr with the measured times"
echo "$STDOUT" | grep -q "^final: "
tap_result $? "  and the run ends"
expect_status 0 "--precision auto on 2 ranks" -- \
    mpirun --oversubscribe -np 2 $DLTRAIN $NET --precision auto --max-steps 2 --limit-test 64 --threads 1
[ "$(echo "$STDOUT" | grep -Ec "$AUTO_LINE")" -eq 1 ]
tap_result $? "  rank 0 timed for both ranks and said it once"
