#!/bin/sh
# test_doc_mask.sh: packed documents with document masking as a user meets
# it (issue 43; --document-mask ID, the network file's data.document_mask):
# nets/llama-tiny.yaml on text whose documents are its lines (a newline,
# byte 10, ends each) trains (its loss falls), differs from the unmasked
# run, and on every layout equals one process within 1e-5 (grid_runs.sh:
# data parallel, tensor parallel (heads split), sequence parallel, a
# pipeline of 2 (the documents reach the second stage's attention and
# rope), pipeline chunks, full recomputation); nets/gpt-tiny.yaml (a learned position table) on a
# pipeline too.  Bad input exits 2 with a message naming what is wrong: a
# separator outside the vocabulary, a negative one, a network without a
# layer that reads documents, a dataset without token windows, a --kernel
# choice of an attention kernel that has no document mask (the bf16 one).
# The numbers against transformers are test_torch.sh's llama_docs; the
# kernels', test_kernels' attention_doc_masks.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 22
. "$top_srcdir/tests/grid_runs.sh"

text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
LLAMA="--net $top_srcdir/nets/llama-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"
DOCS="$LLAMA --document-mask 10"

run 1 docs-one $DOCS --log-every 10
tap_result $? "llama-tiny trains with --document-mask 10 (20 steps)"
falls docs-one 20 0.5
tap_result $? "  its loss falls by more than 0.5 in 20 steps"
run 1 plain-one $LLAMA
/usr/bin/python3 - "$T/docs-one.jsonl" "$T/plain-one.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f) if '"step"' in l] for f in sys.argv[1:3])
print("# first loss %.6f masked, %.6f not" % (a[0], b[0]))
sys.exit(0 if abs(a[0] - b[0]) > 1e-4 else 1)
PY
tap_result $? "  masked and unmasked training differ from the first step"
grid docs-dp2 docs-one 2 $DOCS --grid dp=2
grid docs-tp2 docs-one 2 $DOCS --grid tp=2
grid docs-pp2 docs-one 2 $DOCS --grid pp=2
grid docs-dp2-tp2 docs-one 4 $DOCS --grid dp=2,tp=2
grid docs-tp2-sp docs-one 2 $DOCS --grid tp=2 --sequence-parallel
grid docs-pp2-chunks docs-one 2 $DOCS --grid pp=2 --pipeline-chunks 4
run 1 docs-recompute $DOCS --recompute full && compare docs-recompute docs-one docs-recompute
tap_result $? "docs-recompute: --recompute full as without"

GPT="--net $top_srcdir/nets/gpt-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64 --document-mask 10"
run 1 gpt-docs-one $GPT
tap_result $? "gpt-tiny (a learned position table) trains with --document-mask 10"
grid gpt-docs-pp2 gpt-docs-one 2 $GPT --grid pp=2

SHORT="$LLAMA --max-steps 2"
expect_status 2 "a separator outside the vocabulary" -- $DLTRAIN train $SHORT --document-mask 256
expect_output "data.document_mask: expected a token id below the vocabulary 256, found 256" \
    "  is refused, naming the vocabulary"
expect_status 2 "a negative separator" -- $DLTRAIN train $SHORT --document-mask -2
expect_output "data.document_mask: expected an integer in \\[-1, " "  is refused by the key's range"
cat > "$T/mlp_text.yaml" <<'YAML'
name: mlp_text
input: {shape: [16], dtype: i32, classes: 256}
data: {dataset: text}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 8}
  - {name: fc, type: fc, units: 256}
loss: softmax_cross_entropy
YAML
expect_status 2 "masking a network without attention" -- $DLTRAIN train --net "$T/mlp_text.yaml" --data "$TEXT" \
    --max-steps 2 --document-mask 10
expect_output "data.document_mask: no layer of this network reads document boundaries" "  is refused"
expect_status 2 "masking an image dataset" -- $DLTRAIN train --net "$top_srcdir/nets/lenet5.yaml" --dataset synthetic \
    --max-steps 2 --document-mask 3
expect_output "data.document_mask: the loss 'loss' does not take a label per position" "  is refused, naming the loss"
expect_status 2 "the bf16 attention kernel chosen with masking" -- $DLTRAIN train $SHORT --document-mask 10 \
    --kernel attention=onednn-bf16
expect_output "layer 'model.layers.0.self_attn.attn' \\(attention\\).*kernel 'onednn-bf16' has no document mask" \
    "  is refused, naming the layer and the kernel"
exit 0
