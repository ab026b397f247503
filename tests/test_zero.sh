#!/bin/sh
# test_zero.sh: ZeRO stages 1 and 2 (--zero 1, parallel/zero.h; --zero 2,
# parallel/zero_grads.h; issue 30) against one process (grid_runs.sh: every
# step's loss within 1e-5 relative, the final weights within 1e-5 of the
# largest):
# - LeNet-5 with AdamW, gradient clipping and biases left out of the decay
#   on 2 and 4 data-parallel ranks (61,706 weights: uneven blocks on 4), and
#   with small buckets (the collectives a chunk at a time), the optimizer's
#   state a block a rank (the run's memory line);
# - gpt-tiny on dp=2 x tp=2 (the blocks of a tensor rank's slices) and on
#   dp=2 x pp=2 (the tied embedding's copy on the head's stage; its
#   checkpoint resumed on one process); check
#   --grid counts the optimizer's state a block a rank (--zero 1 and the
#   network file's parallel.zero);
# - checkpoints: a --zero 1 run's resumed on one process, and one
#   process's resumed on --zero 1 over 4 ranks (the whole state gathered
#   into the file, each rank's block taken back);
# - stage 2 (the gradient summed bucket by bucket into its owners as
#   backward ends each): LeNet-5 on 2 and 4 ranks with buckets of a layer
#   or two, gpt-tiny on dp=2 (the head's gradient into the tied embedding's
#   bucket, open all backward), with --recompute full, with two pipeline
#   chunks a step (each chunk's buckets summed), and on dp=2 x tp=2; the
#   memory line counts a rank's gradient values (its block and the bucket
#   arena, fewer than its weights); its checkpoint resumed on one process;
# - --zero 1 --grad-dtype bf16: the sums in bf16, as --grad-dtype bf16's
#   buckets (within 1e-5), 3/4 of the bytes of f32 sums;
# - what they do not do is refused: --compress, other consistency models,
#   stage 2 with a pipeline or bf16 sums, stage 3 with --compress
#   (tests/test_zero3.sh tests stage 3).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 34
. "$top_srcdir/tests/grid_runs.sh"

# LeNet-5 with AdamW: grid_runs.sh's lenet_grid and lenet_resumed (weights within 1e-4)
LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --threads 1 --max-steps 30
    --optimizer adamw --lr 0.002 --weight-decay 0.1 --clip-grad-norm 0.5 --set train.optimizer.no_decay=[bias]"
run 1 lenet-one $LENET
lenet_grid lenet-zero-dp2 lenet-one 2 $LENET --zero 1
lenet_grid lenet-zero-dp4 lenet-one 4 $LENET --zero 1
# buckets of 40 KiB: the sums and the allgather go 2,560 values of each block at a time, staged
lenet_grid lenet-zero-dp4-chunks lenet-one 4 $LENET --zero 1 --bucket-bytes 40K
/usr/bin/python3 - "$T/lenet-zero-dp4.jsonl" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1]) if '"event":"memory"' in l]
n = 61706
blocks = [min(max(n - r * ((n + 3) // 4), 0), (n + 3) // 4) for r in range(4)]
got = sorted((e["d"], e["optimizer_state"]) for e in m)
print("# optimizer state per rank:", [s for _, s in got], "of", 2 * n)
sys.exit(0 if got == [(d, 2 * blocks[d]) for d in range(4)] else 1)
PY
tap_result $? "each rank keeps AdamW's two vectors for its block only"

text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $top_builddir/tests/text-corpus --threads 1 --max-steps 20
    --limit-test 64"
run 1 gpt-one $GPT
grid gpt-zero-dp2-tp2 gpt-one 4 $GPT --grid dp=2,tp=2 --zero 1
# the tied embedding and head on two pipeline ranks: the copies' gradients
# summed before the blocks' sums, each stage's group updating its copy alike
grid gpt-zero-dp2-pp2 gpt-one 4 $GPT --grid dp=2,pp=2 --zero 1
run 4 gpt-zero-dp2-pp2-ck $GPT --grid dp=2,pp=2 --zero 1 --checkpoint-dir "$T/zpp" --checkpoint-every 10 &&
    run 1 gpt-zero-pp-on-one $GPT --resume "$T/zpp/ckpt-0000000010.safetensors" && resumed gpt-one gpt-zero-pp-on-one
tap_result $? "  its checkpoint (the copies and the blocks gathered) resumed on one process continues its run"
expect_status 0 "check --grid dp=4 --zero 1" -- $DLTRAIN check $GPT --optimizer adam --grid dp=4 --zero 1 --bytes
expect_output "^0 +0 +0,1,2,3 +0-24 wte\\.\\.loss +1 +482304 +602880 +241152 " \
    "  counts Adam's state a block a rank: 241,152 of its 964,608 bytes (its gradients: the whole, its block's sums and the staging)"
expect_status 0 "check --grid dp=4 --set parallel.zero=1" -- $DLTRAIN check $GPT --optimizer adam --grid dp=4 \
    --set parallel.zero=1 --bytes
expect_output "^0 +0 +0,1,2,3 +0-24 wte\\.\\.loss +1 +482304 +602880 +241152 " "  and so does the file's parallel.zero"

# --grad-dtype bf16 with --zero 1: the sums travel in bf16 (each chunk
# rounded, summed in f32, rounded once: the bf16 buckets' arithmetic), the
# weights' allgather in f32
# (an order of f32 additions MPI chooses may round a sum to the other bf16
# neighbour, which Adam's normalised steps carry into the weights: losses
# within 1e-5, weights within 1e-3 of the largest)
run 2 lenet-bf16 $LENET --grad-dtype bf16 && run 2 lenet-zero-bf16 $LENET --zero 1 --grad-dtype bf16 --bucket-bytes 40K &&
    /usr/bin/python3 - "$T" <<'PY'
import json, sys
import numpy as np
T = sys.argv[1]
a, b = (np.array([json.loads(l)["loss"] for l in open("%s/%s.jsonl" % (T, n)) if '"step"' in l])
        for n in ("lenet-bf16", "lenet-zero-bf16"))
x, y = (np.fromfile("%s/%s.bin" % (T, n), np.float32) for n in ("lenet-bf16", "lenet-zero-bf16"))
rel, wd = np.max(np.abs(a - b) / np.abs(a)), np.max(np.abs(x - y)) / np.max(np.abs(x))
print("# lenet-zero-bf16 against --grad-dtype bf16 buckets: losses within %.2g, weights %.2g" % (rel, wd))
sys.exit(0 if len(a) == len(b) == 30 and rel <= 1e-5 and wd <= 1e-3 else 1)
PY
tap_result $? "--zero 1 --grad-dtype bf16 trains as --grad-dtype bf16's buckets do"
run 2 lenet-zero-f32 $LENET --zero 1 --bucket-bytes 40K && /usr/bin/python3 - "$T" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open("%s/%s.jsonl" % (sys.argv[1], n)) if '"step"' in l]
        for n in ("lenet-zero-f32", "lenet-zero-bf16"))
s32, s16 = sum(x["bytes_sent"] for x in a), sum(x["bytes_sent"] for x in b)
rel = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
print("# --zero 1 --grad-dtype bf16: %d bytes sent against %d (%.3f: the sums halved, the allgather not), "
      "max relative loss difference %.2g" % (s16, s32, s16 / s32, rel))
sys.exit(0 if len(a) == len(b) == 30 and abs(s16 / s32 - 0.75) < 0.01 and rel > 0 else 1)
PY
tap_result $? "  3/4 of --zero 1's bytes (the sums halved), not f32's losses"
expect_status 2 "--zero 2 --grad-dtype bf16" -- \
    timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --zero 2 --grad-dtype bf16
expect_output "--zero 2: not with --grad-dtype bf16 yet" "  is refused"

# ZeRO stage 2: no rank holds the whole gradient
lenet_grid lenet-zero2-dp2 lenet-one 2 $LENET --zero 2 --bucket-bytes 40K
lenet_grid lenet-zero2-dp4 lenet-one 4 $LENET --zero 2 --bucket-bytes 40K
grid gpt-zero2-dp2 gpt-one 2 $GPT --zero 2 --bucket-bytes 100K
run 1 gpt-one-full $GPT --recompute full
grid gpt-zero2-dp2-full gpt-one-full 2 $GPT --zero 2 --bucket-bytes 100K --recompute full
run 1 gpt-one-chunks $GPT --pipeline-chunks 2
grid gpt-zero2-dp2-chunks gpt-one-chunks 2 $GPT --zero 2 --bucket-bytes 100K --pipeline-chunks 2
grid gpt-zero2-dp2-tp2 gpt-one 4 $GPT --grid dp=2,tp=2 --zero 2 --bucket-bytes 50K
run 4 gpt-zero1-dp4 $GPT --zero 1 && run 4 gpt-zero2-dp4 $GPT --zero 2 --bucket-bytes 100K
/usr/bin/python3 - "$T/gpt-zero1-dp4.jsonl" "$T/gpt-zero2-dp4.jsonl" <<'PY'
import json, sys
one, two = ([json.loads(l) for l in open(f) if '"event":"memory"' in l] for f in sys.argv[1:3])
n = 120576
block = (n + 3) // 4
# the collectives' chunks: a bucket's bytes over 4 ranks, staged unless a chunk is the whole block
staging = lambda bucket: 4 * (bucket // 4 // 4) if bucket // 4 // 4 < block else 0
print("# gradient values per rank: --zero 1", [e["gradients"] for e in one], "--zero 2", [e["gradients"] for e in two])
# stage 1: one per weight, its block's sums and the staging; stage 2: the block, an arena of at least
# the largest layer's and the staging, fewer than one per weight
ok = all(e["gradients"] == n + block + staging(25 << 20) for e in one)
ok = ok and all(block + staging(100 << 10) < e["gradients"] < n for e in two)
sys.exit(0 if ok and len(one) == len(two) == 4 else 1)
PY
tap_result $? "the memory lines: --zero 2 holds the rank's block, the buckets and the staging, fewer than one a weight"
# check --grid plans the same buckets (the default 25 MiB: gpt-tiny is one
# bucket, so a rank holds its block and the whole gradient's arena)
run 4 gpt-zero2-dp4-default $GPT --zero 2 --max-steps 2 &&
    $DLTRAIN check $GPT --grid dp=4 --zero 2 --bytes > "$T/check-zero2.txt" 2>&1 &&
    /usr/bin/python3 - "$T/gpt-zero2-dp4-default.jsonl" "$T/check-zero2.txt" <<'PY'
import json, re, sys
ran = {json.loads(l)["gradients"] for l in open(sys.argv[1]) if '"event":"memory"' in l}
row = [l.split() for l in open(sys.argv[2]) if re.match(r"^0 +0 +0,1,2,3 ", l)]
planned = int(row[0][7]) if row else -1
print("# gradient values: the run", ran, "check --grid", planned / 4)
n = 120576
sys.exit(0 if ran == {planned / 4} and planned / 4 == n // 4 + n else 1)
PY
tap_result $? "  check --grid counts what the run holds (the default buckets: the block, all 120,576 values, the staging)"

# checkpoints both ways (the last 10 steps after a resume against the uninterrupted run)
CK="--max-steps 20"
run 2 lenet-zero-ck $LENET $CK --zero 1 --checkpoint-dir "$T/z" --checkpoint-every 10 &&
    run 1 lenet-one20 $LENET $CK &&
    run 1 lenet-zero-on-one $LENET $CK --resume "$T/z/ckpt-0000000010.safetensors" &&
    lenet_resumed lenet-one20 lenet-zero-on-one
tap_result $? "a --zero 1 checkpoint (the blocks gathered) resumed on one process continues its run"
run 1 lenet-one-ck $LENET $CK --checkpoint-dir "$T/one" --checkpoint-every 10 &&
    run 4 lenet-one-on-zero $LENET $CK --zero 1 --resume "$T/one/ckpt-0000000010.safetensors" &&
    lenet_resumed lenet-one20 lenet-one-on-zero
tap_result $? "one process's checkpoint resumed with --zero 1 on 4 ranks (each its block)"
run 2 lenet-zero2-ck $LENET $CK --zero 2 --bucket-bytes 40K --checkpoint-dir "$T/z2" --checkpoint-every 10 &&
    run 1 lenet-zero2-on-one $LENET $CK --resume "$T/z2/ckpt-0000000010.safetensors" &&
    lenet_resumed lenet-one20 lenet-zero2-on-one
tap_result $? "a --zero 2 checkpoint resumed on one process continues its run"

expect_status 2 "--zero 1 --compress topk:0.1" -- \
    timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --zero 1 --compress topk:0.1
expect_output "--zero 1: not with --compress" "  is refused"
expect_status 2 "--zero 1 --consistency local-sgd:2" -- \
    timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --zero 1 --consistency local-sgd:2
expect_output "--zero 1: synchronous data parallelism only" "  is refused"
expect_status 2 "--zero 2 --grid pp=2" -- timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --zero 2 --grid pp=2
expect_output "--zero 2: not with pipeline parallelism" "  is refused"
expect_status 2 "--zero 3 --compress topk:0.1" -- \
    timeout 120 mpirun --oversubscribe -np 2 $DLTRAIN $LENET --zero 3 --compress topk:0.1
expect_output "--zero 3: not with --compress" "  is refused"
[ $tap_failed -eq 0 ]
