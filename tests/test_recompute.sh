#!/bin/sh
# test_recompute.sh: activation recomputation (--recompute full,
# exec/recompute.c): each block instance of the network file keeps only
# what it reads from outside and runs its layers forward again just before
# their backward.  It changes no result and saves memory:
# - a GPT with blocks, attention dropout and a dropout layer (each mask
#   drawn again in the second forward must be the first's), on one
#   process: every step's loss and the final weights equal the run without
#   recomputation bit for bit, and the run's planned arena (its memory
#   line) is smaller; selective (what every attention kernel does anyway)
#   and none plan the same arena;
# - gpt-tiny recomputed on tp=2 (the tensor group's collectives run again),
#   tp=2 with sequence parallelism, pp=2, pp=2 under zb-h1 (the weights'
#   pass after every input pass) and dp=2 x pp=2 equal one process without
#   recomputation (every step's loss within 1e-5, the weights within 1e-5:
#   grid_runs.sh);
# - a small ResNet (batch norm, whose running statistics must move once a
#   step: its layers never run twice) equals its run without, bit for bit;
# - dltrain check prints the smaller planned peak; a bad value is refused;
# - sequence parallelism (tp=2) plans and runs a smaller arena than tp=2
#   alone: the positions gathered for a linear are made again before its
#   backward, and an output no backward reads goes early
#   (dl_kernel_backward_reads).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 19
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"

# same NAME A B: every step's loss, the final weights and the test results
# (running statistics) of runs A and B bit for bit
same() {
    cmp -s "$T/$2.bin" "$T/$3.bin" && /usr/bin/python3 - "$T/$2.jsonl" "$T/$3.jsonl" <<'PY'
import json, sys
a, b = ([(r["loss"] if r["event"] == "step" else (r["test_loss"], r["test_accuracy"]))
         for r in map(json.loads, open(f)) if r["event"] in ("step", "epoch")] for f in sys.argv[1:3])
sys.exit(0 if a and a == b else 1)
PY
}
# arena RUN: the planned arena of run RUN (its memory line, rank 0)
arena() {
    /usr/bin/python3 -c 'import json, sys
print([r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "memory"][0]["arena_bytes"])' "$T/$1.jsonl"
}

cat > "$T/gpt-drop.yaml" <<'YAML'
name: gpt-dropout
input: {shape: [32], dtype: i32, classes: 256}
data: {dataset: text}
blocks:
  block:
    layers:
      - {name: ln_1, type: layernorm}
      - {name: attn.c_attn, type: fc, units: 96}
      - {name: attn.attn, type: attention, heads: 4, dropout: 0.2}
      - {name: attn.c_proj, type: fc, units: 32}
      - {name: add1, type: add, inputs: [attn.c_proj, input]}
      - {name: ln_2, type: layernorm}
      - {name: mlp.c_fc, type: fc, units: 128}
      - {name: mlp.act, type: gelu}
      - {name: mlp.c_proj, type: fc, units: 32}
      - {name: mlp.drop, type: dropout, rate: 0.1}
      - {name: add2, type: add, inputs: [mlp.drop, add1]}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 32, init_std: 0.02}
  - {name: wpe, type: position_embedding, context: 32, init_std: 0.02}
  - {name: h, block: block, repeat: 3}
  - {name: ln_f, type: layernorm}
  - {name: lm_head, type: fc, units: 256, bias: false, share: {weight: wte}}
loss: softmax_cross_entropy
train: {batch: 8, epochs: 1, seed: 5, optimizer: {type: adamw, lr: 0.003}}
YAML
DROP="--net $T/gpt-drop.yaml --data $TEXT --threads 1 --max-steps 15 --limit-test 32"
run 1 drop-none $DROP --recompute none
tap_result $? "a GPT with dropout, no recomputation"
run 1 drop-full $DROP --recompute full
tap_result $? "  --recompute full"
same drop drop-none drop-full
tap_result $? "  every step's loss and the final weights are the run's without, bit for bit (the masks drawn again)"
none=$(arena drop-none) full=$(arena drop-full)
echo "# planned arena: $none bytes, $full recomputed"
[ "$full" -lt "$none" ]
tap_result $? "  its planned arena is smaller ($full against $none bytes)"
run 1 drop-selective $DROP --recompute selective && [ "$(arena drop-selective)" = "$none" ] && same drop drop-none drop-selective
tap_result $? "  selective: the same arena and results as none"

GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"
run 1 gpt-one $GPT
tap_result $? "gpt-tiny on one process, no recomputation"
grid gpt-tp2-full gpt-one 2 $GPT --grid tp=2 --recompute full
grid gpt-tp2-sp-full gpt-one 2 $GPT --grid tp=2 --sequence-parallel --recompute full
grid gpt-pp2-full gpt-one 2 $GPT --grid pp=2 --recompute full
grid gpt-pp2-zb-full gpt-one 2 $GPT --grid pp=2 --pipeline-schedule zb-h1 --recompute full
grid gpt-dp2-pp2-full gpt-one 4 $GPT --grid dp=2,pp=2 --recompute full
run 2 gpt-tp2-none $GPT --grid tp=2 && [ "$(arena gpt-tp2-full)" -lt "$(arena gpt-tp2-none)" ]
tap_result $? "tp=2: a rank's planned arena is smaller recomputed ($(arena gpt-tp2-full) against $(arena gpt-tp2-none) bytes)"

cat > "$T/resnet.yaml" <<'YAML'
name: block-resnet
input: {shape: [3, 16, 16], classes: 5}
data: {dataset: synthetic, train_samples: 320, test_samples: 64}
blocks:
  basic:
    layers:
      - {name: conv1, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
      - {name: bn1, type: batchnorm}
      - {name: relu1, type: relu}
      - {name: conv2, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
      - {name: bn2, type: batchnorm}
      - {name: add, type: add, inputs: [bn2, input]}
      - {name: relu2, type: relu}
layers:
  - {name: stem, type: conv, filters: 8, kernel: 3, pad: 1}
  - {name: layer1, block: basic, repeat: 2}
  - {name: pool, type: global_avgpool}
  - {name: fc, type: fc, units: 5}
loss: softmax_cross_entropy
train: {batch: 32, epochs: 1, seed: 2, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
RESNET="--net $T/resnet.yaml --threads 1 --quiet"
run 1 resnet-none $RESNET && run 1 resnet-full $RESNET --recompute full && same resnet resnet-none resnet-full &&
    [ "$(arena resnet-full)" -lt "$(arena resnet-none)" ]
tap_result $? "a ResNet of blocks recomputed equals its run without, bit for bit, test results too (batch norm kept, its statistics moved once a step), with a smaller arena"

expect_status 0 "check gpt-tiny --recompute full" -- $DLTRAIN check $GPT --batch 32 --recompute full
peak_full=$(echo "$OUT" | sed -n 's/^planned peak: \([0-9.]* [KMG]iB\).*/\1/p')
$DLTRAIN check $GPT --batch 32 --bytes > "$T/check-none.txt" 2>&1
$DLTRAIN check $GPT --batch 32 --bytes --recompute full > "$T/check-full.txt" 2>&1
a=$(sed -n 's/^planned peak: \([0-9]*\) for.*/\1/p' "$T/check-none.txt")
b=$(sed -n 's/^planned peak: \([0-9]*\) for.*/\1/p' "$T/check-full.txt")
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt "$a" ]
tap_result $? "  check's planned peak is smaller recomputed ($peak_full; $b against $a bytes)"
# sequence parallelism: the gathered positions made again before the
# linear's backward (recompute.c), the bands alone kept between
for sp in "" "--sequence-parallel"; do
    $DLTRAIN check $GPT --batch 32 --grid tp=2 --bytes $sp > "$T/check-tp2$sp.txt" 2>&1
done
a=$(awk '$1 == 0 && $2 == 0 && $3 == 0 {print $11}' "$T/check-tp2.txt")
b=$(awk '$1 == 0 && $2 == 0 && $3 == 0 {print $11}' "$T/check-tp2--sequence-parallel.txt")
echo "# tp=2 arena: $a bytes, $b with sequence parallelism"
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt "$a" ]
tap_result $? "check --grid tp=2: sequence parallelism plans a smaller arena ($b against $a bytes)"
run 2 gpt-tp2-sp $GPT --grid tp=2 --sequence-parallel && [ "$(arena gpt-tp2-sp)" -lt "$(arena gpt-tp2-none)" ] &&
    compare "tp=2 with sequence parallelism" gpt-one gpt-tp2-sp
tap_result $? "  and so does its run ($(arena gpt-tp2-sp) against $(arena gpt-tp2-none) bytes), as one process"
expect_status 2 "--recompute everything" -- $DLTRAIN check $GPT --recompute everything
expect_output "recompute: expected one of none, selective, full, found 'everything'" "  is refused, naming the values"
exit $((tap_failed > 0))
