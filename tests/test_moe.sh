#!/bin/sh
# test_moe.sh: the mixture-of-experts layer as a user meets it (issue 44):
# nets/moe-tiny.yaml (llama-tiny's blocks, each MLP a `moe` layer: a router
# to 2 of 4 SwiGLU experts with the Switch load-balancing loss) has the
# parameter counts its header says (total and used a position) and its
# model FLOPs count the chosen experts; nets/mixtral-8x7b.yaml and
# olmoe-1b-7b.yaml have Hugging Face's counts (46,702,792,704 with
# 12,879,925,248 used a position; 6,919,161,856 with 1,282,017,280);
# moe-tiny trains on text (its loss falls), with a
# capacity factor too, reports its balancing loss (in the loss, and apart
# as aux_loss) and its experts' load (the most loaded over the mean, the
# share dropped), and equals one process within 1e-5 over 20 steps
# on data parallelism (the balancing loss is per sample, so any split of
# the batch adds up to one process's), tensor parallelism (the moe layer
# whole on each rank), dp x tp on 4, a pipeline of 2 and full
# recomputation; top_k above the
# experts, no experts and a negative capacity factor each exit 2 naming
# the layer.  (tests/test_grad_transformer.c checks its gradients, the
# balancing and z losses' included, against finite differences;
# test_torch.sh its step against PyTorch.)
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 27
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
MOE="--net $top_srcdir/nets/moe-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"

expect_status 0 "check moe-tiny" -- $DLTRAIN check $MOE
expect_output "^total: 140096 trainable parameters" "  140,096 trainable parameters (its header's count)"
expect_output "block_sparse_moe +moe " "  its blocks' MLPs are moe layers"
expect_output "^active: 90944 parameters a position uses" "  90,944 of them a position uses (2 of 4 experts)"
expect_output "^model FLOPs per token: 646\\.7k " "  model FLOPs per token count the chosen experts' products (6 x 90,112 + 2 x 12 x 64 x 64 + the router and gates: 646,656)"
# the published models: counts as Hugging Face's (total, and what a position uses); no
# machine of ours holds them, so check plans against 2 TiB
mkdir -p "$T/ids16"
/usr/bin/python3 -c "
import struct, sys
ids = [i * 7919 % 32000 for i in range(4000)]
open(sys.argv[1], 'wb').write(struct.pack('<256i', 20240520, 1, len(ids), *[0] * 253) + struct.pack('<%dH' % len(ids), *ids))
" "$T/ids16/train.bin"
expect_status 0 "check nets/mixtral-8x7b.yaml" -- $DLTRAIN check --net "$top_srcdir/nets/mixtral-8x7b.yaml" \
    --data "$T/ids16" --memory-per-rank 2T
expect_output "^total: 46702792704 trainable parameters" "  46,702,792,704 parameters (Hugging Face's count)"
expect_output "^active: 12879925248 parameters a position uses" "  12,879,925,248 of them a position uses (2 of 8)"
expect_status 0 "check nets/olmoe-1b-7b.yaml" -- $DLTRAIN check --net "$top_srcdir/nets/olmoe-1b-7b.yaml" \
    --data "$T/ids16" --memory-per-rank 2T
expect_output "^total: 6919161856 trainable parameters" "  6,919,161,856 parameters (Hugging Face's count)"
expect_output "^active: 1282017280 parameters a position uses" "  1,282,017,280 of them a position uses (8 of 64)"
expect_status 2 "top_k 5 of 4 experts" -- $DLTRAIN check $MOE --set args.top_k=5
expect_output "moe-tiny.yaml:[0-9]+:[0-9]+: layer 'model.layers.0.block_sparse_moe' \\(moe\\).*top_k: expected at most experts \\(4\\), found 5" \
    "  is refused, located at the layer"
expect_status 2 "no experts" -- $DLTRAIN check $MOE --set args.experts=0
expect_output "block_sparse_moe.*experts" "  is refused, naming the key"
expect_status 2 "a negative capacity factor" -- $DLTRAIN check $MOE --set args.capacity_factor=-1
expect_output "block_sparse_moe.*capacity_factor" "  is refused, naming the key"

run 1 moe-one $MOE --log-every 10
tap_result $? "moe-tiny trains on text (20 steps)"
falls moe-one 20 0.5
tap_result $? "  its loss falls by more than 0.5 in 20 steps"
/usr/bin/python3 - "$T/moe-one.jsonl" "$T/moe-one.txt" <<'PY'
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
aux = [s.get("aux_loss", -1) for s in steps]
shown = re.findall(r"loss ([0-9.]+) \(aux ([0-9.]+)\)", open(sys.argv[2]).read())
print("# aux_loss %.4f at step 1, %.4f at step %d; progress lines %s" % (aux[0], aux[-1], len(aux), shown))
sys.exit(0 if all(0.03 < a < 0.08 for a in aux) and len(shown) == 2 else 1)
PY
tap_result $? "  the balancing loss in --metrics (near 2 layers x 0.01 x k = 0.04 when balanced) and on the progress lines"
run 1 moe-capacity $MOE --set args.capacity_factor=0.5
tap_result $? "with capacity_factor 0.5 (choices over capacity dropped) it trains"
/usr/bin/python3 - "$T/moe-one.jsonl" "$T/moe-capacity.jsonl" <<'PY'
import json, sys
one, cap = ([json.loads(l) for l in open(f) if '"step"' in l] for f in sys.argv[1:3])
ok = all(s["expert_max_load"] >= 1 and s["expert_dropped"] == 0 for s in one)
# a capacity of ceil(0.5 x 64 x 2 / 4) = 16 choices an expert of a sample's 128: at least half dropped
ok = ok and all(0.5 <= s["expert_dropped"] < 1 for s in cap)
print("# dropless: most loaded expert %.3f x its layer's mean, dropped %g; capacity 0.5: dropped %.3f" %
      (one[-1]["expert_max_load"], one[-1]["expert_dropped"], cap[-1]["expert_dropped"]))
sys.exit(0 if ok and len(one) == 20 and len(cap) == 20 else 1)
PY
tap_result $? "  --metrics' expert load: the most loaded expert (>= 1 x the mean), none dropped dropless, half or more at capacity 0.5"
grid moe-dp2 moe-one 2 $MOE --grid dp=2
grid moe-tp2 moe-one 2 $MOE --grid tp=2
grid moe-dp2-tp2 moe-one 4 $MOE --grid dp=2,tp=2
grid moe-pp2 moe-one 2 $MOE --grid pp=2
grid moe-recompute moe-one 1 $MOE --recompute full
exit 0
