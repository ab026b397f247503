#!/bin/sh
# test_gpt_grid.sh: a GPT on grids as Megatron-LM lays it out (issue 30;
# issue 27's sequences over a tensor group, strided parameter slices and
# tied parameters across tensor and pipeline ranks), against one process:
# every step's loss within 1e-5 relative and the final weights within 1e-5
# of the largest (grid_runs.sh).
# - Tensor parallelism, gpt-tiny on tp=2, tp=4 (one head a rank) and
#   dp=2 x tp=2: c_attn split by its outputs in three groups (q, k and v,
#   whole heads a rank: a strided slice of its weight), the attention core
#   on the rank's heads, c_proj and the MLP's second linear by their inputs
#   (one allreduce each); the token embedding by its rows (vocabulary-
#   parallel: partial sums) and the head tied to it by its outputs on the
#   same slice, so the loss is vocabulary-parallel at every position, also
#   when the ranks do not divide the vocabulary (unequal bands: gpt-tiny
#   with 257 ids on tp=2 and tp=2 x pp=2, GPT-2's 50,257 in check); heads
#   the ranks do not divide are refused, naming the layer.
# - A net with attention dropout on a whole packed input (cut by heads) and
#   on three separate q, k, v inputs (each rank draws the whole layer's
#   masks for its heads) and an untied head split by its outputs, on tp=2.
# - Sequence parallelism (Korthikanti et al. 2022): layer norms and residual
#   adds on the tensor rank's positions, the linears after them reading
#   them gathered, on tp=2 and tp=2 x pp=2 (--sequence-parallel, and the
#   network file's parallel.sequence_parallel through --set).
# - Pipelines: the embedding on the first stage and the head tied to it on
#   the last (each rank a copy, their gradients summed before each update)
#   on pp=2, interleaved pp=2 (4 stages), tp=2 x pp=2 (copies of a slice)
#   and dp=2 x pp=2, with the embeddings left out of the weight decay (the
#   copy decayed as its owner); check counts the copy.
# - Checkpoints: tp=2's and pp=2's resumed on one process, one process's on
#   pp=2 (the copy filled from the owner's tensor).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 36
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"

expect_status 0 "check gpt-tiny --grid tp=2" -- $DLTRAIN check $GPT --grid tp=2
expect_output "^3 +h\\.0\\.attn\\.c_attn +0 +outputs \\(by 3 groups: q, k, v\\) +6240\$" \
    "c_attn split by its outputs in q, k, v groups: 6,240 of its 12,480 parameters a rank"
expect_output "^4 +h\\.0\\.attn\\.attn +0 +heads " "the attention core split by heads"
expect_output "^10 +h\\.0\\.mlp\\.c_proj +0 +inputs, partial sums " "the MLP's second linear split by its inputs"
expect_output "^0 +wte +0 +vocabulary, partial sums +8192\$" "the token embedding split by its rows (the vocabulary)"
expect_output "^23 +lm_head +0 +outputs +0\$" "  and the head tied to it by its outputs, on the same slice"
expect_output "^24 +loss +0 +classes \\(no gather\\)" "  so the loss is vocabulary-parallel at every position"
expect_status 2 "2 heads on 4 tensor ranks" -- $DLTRAIN check $GPT --set args.heads=2 --grid tp=4
expect_output "layer 'h\\.0\\.attn\\.attn' \\(attention\\), split auto: 4 tensor ranks do not divide its heads" \
    "  refused, naming the attention layer"

run 1 gpt-one $GPT
grid gpt-tp2 gpt-one 2 $GPT --grid tp=2
grid gpt-tp4 gpt-one 4 $GPT --grid tp=4
grid gpt-dp2-tp2 gpt-one 4 $GPT --grid dp=2,tp=2

# attention dropout; a packed input kept whole (split: none) cut by heads
# on the way in; q, k and v from three linears split by their outputs; the
# head split by its outputs, so the loss is vocabulary-parallel at every
# position.  SGD: the keys' bias has a gradient of 0 but for rounding,
# which Adam would scale up to whole steps.
cat > "$T/attn.yaml" <<'YAML'
name: tp-attention
input: {shape: [16], dtype: i32, classes: 256}
data: {dataset: text}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 32, init_std: 0.02}
  - {name: qkv, type: fc, units: 96, split: none}
  - {name: attn, type: attention, heads: 4, dropout: 0.2}
  - {name: proj, type: fc, units: 32}
  - {name: add1, type: add, inputs: [proj, wte]}
  - {name: ln, type: layernorm}
  - {name: q, type: fc, units: 32}
  - {name: k, type: fc, units: 32, inputs: [ln]}
  - {name: v, type: fc, units: 32, inputs: [ln]}
  - {name: attn2, type: attention, heads: 4, dropout: 0.2, inputs: [q, k, v]}
  - {name: proj2, type: fc, units: 32}
  - {name: add2, type: add, inputs: [proj2, add1]}
  - {name: head, type: fc, units: 256}
loss: softmax_cross_entropy
train: {batch: 8, epochs: 1, seed: 3, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
YAML
ATTN="--net $T/attn.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 32"
run 1 attn-one $ATTN && grid attn-tp2 attn-one 2 $ATTN --grid tp=2

# a vocabulary the tensor ranks do not divide (257: bands of 128 and 129
# rows on 2 ranks, 64 and 65 on 4), as GPT-2's 50,257
V257="$GPT --set args.vocab=257"
run 1 gpt257-one $V257
grid gpt257-tp2 gpt257-one 2 $V257 --grid tp=2
grid gpt257-tp2-pp2 gpt257-one 4 $V257 --grid tp=2,pp=2
mkdir -p "$T/ids"
/usr/bin/python3 -c "
import random, struct, sys
random.seed(1); ids = [random.randrange(50257) for _ in range(4000)]
open(sys.argv[1], 'wb').write(struct.pack('<256i', 20240520, 1, len(ids), *[0] * 253) + struct.pack('<%dH' % len(ids), *ids))
" "$T/ids/train.bin"
expect_status 0 "check nets/gpt2.yaml --grid tp=2" -- $DLTRAIN check --net "$top_srcdir/nets/gpt2.yaml" --data "$T/ids" \
    --context 64 --grid tp=2
expect_output "^0 +wte +0 +vocabulary, partial sums +19298304\$" \
    "  GPT-2's embedding splits by its 50,257 rows: 25,128 x 768 on tensor rank 0"

# sequence parallelism: layer norms and residual adds on the rank's positions
expect_status 0 "check gpt-tiny --grid tp=2 --sequence-parallel" -- $DLTRAIN check $GPT --grid tp=2 --sequence-parallel
expect_output "^2 +h\\.0\\.ln_1 +0 +positions \\(sequence parallel\\); input 0: rows sliced +128\$" \
    "the first layer norm cuts its positions from the whole input"
expect_output "^8 +h\\.0\\.mlp\\.c_fc +0 +outputs; input 0: rows gathered " "  and the next linear gathers them"
grid gpt-tp2-sp gpt-one 2 $GPT --grid tp=2 --sequence-parallel --trace "$T/sp-trace.json"
# a row-parallel linear's partial sums are reduce-scattered into the bands
# of positions (no allreduce then a slice; the trace names the add that
# reads them), and the column-parallel linear's partial input gradient
# too; only the embedding's sums (read by the whole-position add) are
# allreduced
events() { grep -c "\"name\":\"$1\".*\"tensor\":\"$2" "$T/sp-trace.json"; }
echo "# sequence parallel trace: $(events 'tp reduce-scatter rows' 'h\.[0-9]*\.add') output" \
    "reduce-scatters, $(events 'tp reduce-scatter rows gradient' '') gradient ones," \
    "$(events 'tp allreduce' '') allreduces ($(events 'tp allreduce' 'wte') of wte)"
[ "$(events 'tp reduce-scatter rows' 'h\.[0-9]*\.add')" -gt 0 ] &&
    [ "$(events 'tp allreduce' '')" = "$(events 'tp allreduce' 'wte')" ]
tap_result $? "sequence parallelism: the row-parallel linears' sums reduce-scattered, never allreduced"
[ "$(events 'tp reduce-scatter rows gradient' '')" -gt 0 ] && [ "$(events 'tp allreduce gradient' '')" = 0 ]
tap_result $? "  and the column-parallel linears' input gradients reduce-scattered"
grid gpt-tp2-pp2-sp gpt-one 4 $GPT --grid tp=2,pp=2 --set parallel.sequence_parallel=true

# the tied head on another pipeline rank than the embedding
expect_status 0 "check gpt-tiny --grid pp=2" -- $DLTRAIN check $GPT --grid pp=2
expect_output "^23 +lm_head +1 +whole +16384 \\(a copy of wte\\.weight\\)\$" \
    "the head's stage holds a copy of the embedding (16,384 values)"
expect_status 0 "check gpt-tiny --grid tp=2,pp=2" -- $DLTRAIN check $GPT --grid tp=2,pp=2
expect_output "^23 +lm_head +1 +outputs +8192 \\(a copy of wte\\.weight\\)\$" \
    "  on tp=2 x pp=2, a copy of the tensor rank's vocabulary slice (8,192 values)"
grid gpt-pp2 gpt-one 2 $GPT --grid pp=2
grid gpt-pp2-interleaved gpt-one 2 $GPT --grid pp=2 --pipeline-schedule interleaved:2 --pipeline-chunks 4
grid gpt-tp2-pp2 gpt-one 4 $GPT --grid tp=2,pp=2
grid gpt-dp2-pp2 gpt-one 4 $GPT --grid dp=2,pp=2
# GPT-2's recipe leaves the embeddings out of the decay: the head's copy too
# (a large decay, so that a copy decayed otherwise would show)
NODECAY="$GPT --set train.optimizer.no_decay=[bias,norm,embedding] --set train.optimizer.weight_decay=1"
run 1 gpt-one-nodecay $NODECAY && grid gpt-pp2-nodecay gpt-one-nodecay 2 $NODECAY --grid pp=2

# a tp=2 checkpoint of step 10 resumed on one process
run 1 gpt-one-ckpt $GPT --checkpoint-dir "$T/one" --checkpoint-every 10 &&
    run 2 gpt-tp2-ckpt $GPT --grid tp=2 --checkpoint-dir "$T/tp2" --checkpoint-every 10 &&
    run 1 gpt-tp2-on-one $GPT --resume "$T/tp2/ckpt-0000000010.safetensors" && resumed gpt-one gpt-tp2-on-one
tap_result $? "a tp=2 checkpoint (strided c_attn slices gathered) resumed on one process continues its run"

run 2 gpt-pp2-ckpt $GPT --grid pp=2 --checkpoint-dir "$T/pp2" --checkpoint-every 10 &&
    run 1 gpt-pp2-on-one $GPT --resume "$T/pp2/ckpt-0000000010.safetensors" && resumed gpt-one gpt-pp2-on-one
tap_result $? "a pp=2 checkpoint (the tied weight once) resumed on one process continues its run"
run 2 gpt-one-on-pp2 $GPT --grid pp=2 --resume "$T/one/ckpt-0000000010.safetensors" && resumed gpt-one gpt-one-on-pp2
tap_result $? "one process's checkpoint resumed on pp=2 (the head's copy from the embedding's tensor)"
[ $tap_failed -eq 0 ]
