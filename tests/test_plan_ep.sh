#!/bin/sh
# test_plan_ep.sh: `dltrain plan` with expert parallelism (issue 44,
# doc/planner.md).  FLOP-estimated layer times, no tuning database, no
# calibration cache: reproducible.  On 4 ranks moe-tiny (4 experts, top 2,
# batch 16):
# - the plan lists exactly the grids with expert ranks the trainer takes
#   (every ep > 1 dividing dp and the 4 experts), as dp=R,ep=E in the table,
#   each with its all-to-all time (none without ep), and a rank of ep=E
#   holds 16 bytes (weight, gradient, AdamW's two moments) less per expert
#   weight it leaves to the others: (1 - 1/E) of the 98,304;
# - their all-to-alls equal the alpha-beta formula per moe layer and step:
#   forward 2 exchanges of the rows (2 choices x 64 positions x 64 floats a
#   sample), backward one of twice the bytes and one of the rows, each
#   (E-1) alpha + (E-1)/E of the bytes over the rate; over the link between
#   nodes when an expert group spans them (ep=4 on nodes of 2 ranks: a slow
#   link makes it cost more), within the node otherwise (dp=4 x ep=2);
# - with 8 experts of 512 units a memory limit that only layouts with
#   expert ranks meet (every other one, ZeRO and recomputation tried, needs
#   more) plans one with ep (recomputation tried on those over it, never
#   ZeRO, which the trainer refuses with expert ranks);
# - ep follows the trainer's rules: 6 experts give no ep=4, a batch of 14
#   none at dp=4, --zero 1 none at all (infeasible, the reason given);
# - a network without experts (LeNet-5) lists no layout with ep.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
XDG_CACHE_HOME="$T/cache"
export XDG_CACHE_HOME
tap_plan 18

MOE="$DLTRAIN plan --net $top_srcdir/nets/moe-tiny.yaml --data $top_srcdir/nets --flops 1e10 --no-db --threads 1 --ranks 4"
# ep_grids FILE: the (dp, ep, tp, pp) with expert ranks a plan's JSON lists, one a line
ep_grids() {
    /usr/bin/python3 -c '
import json, sys
for g in sorted({(l["dp"], l["ep"], l["tp"], l["pp"]) for l in json.load(open(sys.argv[1]))["layouts"] if l["ep"] > 1}):
    print("%d,%d,%d,%d" % g)' "$1" | tr '\n' ' '
}

expect_status 0 "plan moe-tiny on 4 ranks" -- $MOE --json
echo "$STDOUT" > "$T/moe.json"
/usr/bin/python3 - "$T/moe.json" <<'PY'
import json, sys
L = json.load(open(sys.argv[1]))["layouts"]
grids = {(l["dp"], l["ep"], l["tp"], l["pp"]) for l in L if l["ep"] > 1}
want = {(4, 2, 1, 1), (4, 4, 1, 1), (2, 2, 2, 1), (2, 2, 1, 2)}
ok = grids == want and all(l["dp"] % l["ep"] == 0 and l["dp"] * l["tp"] * l["pp"] == 4 for l in L)
ranked = [l for l in L if l["feasible"]]
ok = ok and all((l["ep_s"] > 0) == (l["ep"] > 1) for l in ranked)
key = lambda l: (l["dp"], l["tp"], l["pp"], l["chunks"], l["bucket_bytes"], l["by_samples"], tuple(l["whole"]))
plain = {key(l): l for l in ranked if l["ep"] == 1}
pairs = [(plain[key(l)], l) for l in ranked if l["ep"] > 1 and l["pp"] == 1 and key(l) in plain]
drop = [(a["memory_bytes"] - b["memory_bytes"], round(16 * 98304 * (1 - 1 / b["ep"]))) for a, b in pairs]
print("# ep grids (dp, ep, tp, pp): %s; memory dropped by ep, as planned and by the formula: %s" % (sorted(grids), drop))
sys.exit(0 if ok and len(pairs) >= 3 and all(a == b for a, b in drop) else 1)
PY
tap_result $? "every grid with expert ranks listed, each with its all-to-alls and an ep-th of the experts' memory"
expect_status 0 "the table" -- $MOE --top 100
expect_output "^[0-9]+ +dp=1,ep=4,tp=1,pp=1 " "  names dp=1,ep=4,tp=1,pp=1"
expect_output "^[0-9]+ +dp=2,ep=2,tp=1,pp=1 " "  and dp=2,ep=2,tp=1,pp=1"

# The all-to-alls by the formula: one node (1 GB/s, 2 us), then nodes of 2
# ranks joined by a slow link and by a fast one.
NODE="--node-link alpha=2us,bw=1GB/s"
$MOE $NODE --json > "$T/node.json" 2> "$T/node.err" &&
    $MOE $NODE --ranks-per-node 2 --link alpha=50us,bw=100MB/s --json > "$T/slow.json" 2> "$T/slow.err" &&
    $MOE $NODE --ranks-per-node 2 --link alpha=5us,bw=10GB/s --json > "$T/fast.json" 2> "$T/fast.err"
tap_result $? "plan on one node and on nodes of 2 ranks with a slow and a fast link"
/usr/bin/python3 - "$T/node.json" "$T/slow.json" "$T/fast.json" <<'PY'
import json, sys
def load(f):
    return {(l["dp"], l["ep"], l["tp"]): l for l in json.load(open(f))["layouts"]
            if l["feasible"] and l["pp"] == 1 and l["bucket_bytes"] == 0}
node, slow, fast = (load(f) for f in sys.argv[1:4])
def alltoall(E, x, alpha, beta):
    return (E - 1) * alpha + x * (E - 1) / E * beta
def want(dp, E, alpha, beta):
    X = (16 // dp) * 2 * 64 * 64 * 4  # a rank's rows: its samples x 2 choices x 64 positions x 64 floats
    return 2 * (2 * alltoall(E, X, alpha, beta) + alltoall(E, 2 * X, alpha, beta) + alltoall(E, X, alpha, beta))
ok = True
checks = [(node, (4, 2, 1), 2e-6, 1e-9), (node, (4, 4, 1), 2e-6, 1e-9), (node, (2, 2, 2), 2e-6, 1e-9),
          (slow, (4, 4, 1), 50e-6, 1e-8), (fast, (4, 4, 1), 5e-6, 1e-10),
          (slow, (4, 2, 1), 2e-6, 1e-9), (fast, (4, 2, 1), 2e-6, 1e-9)]  # ep=2: each group on one node
for plan, g, alpha, beta in checks:
    w = want(g[0], g[1], alpha, beta)
    got = plan[g]["ep_s"] if g in plan else -1
    if abs(got - w) > 1e-9 * w:
        print("# dp=%d,ep=%d,tp=%d: all-to-alls %g s, the formula %g s" % (g + (got, w)))
        ok = False
print("# dp=1,ep=4 all-to-alls: %.3f ms on the slow link, %.3f ms on the fast one"
      % (1e3 * slow[(4, 4, 1)]["ep_s"], 1e3 * fast[(4, 4, 1)]["ep_s"]))
sys.exit(0 if ok else 1)
PY
tap_result $? "each layout's all-to-alls equal the formula, over the link only where an expert group spans nodes"
/usr/bin/python3 - "$T/slow.json" "$T/fast.json" <<'PY'
import json, sys
slow, fast = ({(l["dp"], l["ep"], l["tp"], l["pp"], l["schedule"], l["chunks"], l["bucket_bytes"]): l
               for l in json.load(open(f))["layouts"] if l["feasible"]} for f in sys.argv[1:3])
spans = [k for k in slow if k[1] == 4]  # ep=4 groups span both nodes (no pipeline: the step is one stage's)
rest = lambda l: l["step_s"] - l["ep_s"] - l["dp_exposed_s"]  # compute and the optimizer, the same on any link
ok = spans and all(slow[k]["ep_s"] > 2 * fast[k]["ep_s"] and slow[k]["step_s"] > fast[k]["step_s"] and
                   abs(rest(slow[k]) - rest(fast[k])) <= 1e-9 * slow[k]["step_s"] for k in spans)
sys.exit(0 if ok else 1)
PY
tap_result $? "a slow link makes ep=4 (spanning the nodes) slower, by its all-to-alls in the step"
expect_status 0 "the table on the slow link" -- $MOE $NODE --ranks-per-node 2 --link alpha=50us,bw=100MB/s
expect_output "^  dp=1,ep=4,tp=1,pp=1 .*expert all-to-alls \\+[0-9.]+ ms" "  says dp=1,ep=4 lost by its all-to-alls"

# 8 experts of 512 units: 1,572,864 expert weights, 25 MB with AdamW; a
# rank of dp=1 x ep=4, or of ep=2 x pp=2, holds a quarter of them.
BIG="$MOE --set args.experts=8 --set args.mlp=512 --memory-per-rank 12000000"
expect_status 0 "plan 8 experts of 512 units under 12,000,000 bytes per rank" -- $BIG --json
echo "$STDOUT" | /usr/bin/python3 -c '
import json, sys
L = json.load(sys.stdin)["layouts"]
best = L[0]
plain = [l for l in L if l["ep"] == 1 and "memory_bytes" in l]
saved = [l for l in plain if l["zero"] or l["recompute"]]
print("# the best: dp=%d,ep=%d,tp=%d,pp=%d, %d bytes; the least without ep: %d bytes (ZeRO or recomputation on %d of them)"
      % (best["dp"] // best["ep"], best["ep"], best["tp"], best["pp"], best["memory_bytes"],
         min(l["memory_bytes"] for l in plain), len(saved)))
ok = best["feasible"] and best["ep"] > 1 and best["memory_bytes"] <= 12000000
ok = ok and all(l["ep"] > 1 for l in L if l["feasible"])
ok = ok and plain and saved and all(l["memory_bytes"] > 12000000 and not l["feasible"] for l in plain)
ok = ok and any(l["ep"] > 1 and l["recompute"] for l in L) and not any(l["ep"] > 1 and l["zero"] for l in L)
sys.exit(0 if ok else 1)'
tap_result $? "only layouts with expert ranks fit: the best has ep (none saved by ZeRO, which the trainer refuses with ep)"

$MOE --set args.experts=6 --json > "$T/six.json" 2> "$T/six.err" &&
    [ "$(ep_grids "$T/six.json")" = "2,2,1,2 2,2,2,1 4,2,1,1 " ]
tap_result $? "6 experts: ep=2 only (ep=4 does not divide them): $(ep_grids "$T/six.json")"
$MOE --batch 14 --json > "$T/b14.json" 2> "$T/b14.err" && [ "$(ep_grids "$T/b14.json")" = "2,2,1,2 2,2,2,1 " ]
tap_result $? "--batch 14: no ep at dp=4 (14 samples do not divide over 4 data ranks): $(ep_grids "$T/b14.json")"
expect_status 0 "--zero 1" -- $MOE --zero 1 --json
echo "$STDOUT" | /usr/bin/python3 -c '
import json, sys
L = json.load(sys.stdin)["layouts"]
ep = [l for l in L if l["ep"] > 1]
ok = len(ep) == 4 and all(not l["feasible"] and l["why"] == "--zero 1: not with expert ranks (ep=%d) yet" % l["ep"]
                          for l in ep)
sys.exit(0 if ok and any(l["feasible"] and l["dp"] == 4 for l in L) else 1)'
tap_result $? "  expert ranks infeasible with --zero 1, saying why; data parallelism planned"

expect_status 0 "plan LeNet-5 (no experts) on 4 ranks" -- $DLTRAIN plan --net "$top_srcdir/nets/lenet5.yaml" --flops 1e10 \
    --no-db --threads 1 --ranks 4 --json
echo "$STDOUT" | /usr/bin/python3 -c '
import json, sys
L = json.load(sys.stdin)["layouts"]
sys.exit(0 if L and all(l["ep"] == 1 and l.get("ep_s", 0) == 0 for l in L) else 1)'
tap_result $? "  lists no layout with expert ranks"
exit $((tap_failed > 0))
