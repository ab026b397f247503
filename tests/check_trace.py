#!/usr/bin/python3
# check_trace.py: checks a `dltrain --trace` file (tests/test_trace.sh)
# against what the run must have done, computed here from the grid and the
# schedule's definition rather than read from dltrain:
#   - valid JSON, every rank a process named "rank R (d,t,p)" with its grid
#     position (rank = t + T*(d + D*p)), the recorded steps on every rank;
#   - within every thread, spans nest or are disjoint;
#   - on every rank and step, the forward/backward passes come in the
#     schedule's order (gpipe: all forwards, then all backwards; 1f1b:
#     min(P-p-1, M) forwards, then one forward and one backward, then the
#     remaining backwards), each chunk's forward ending before its backward
#     starts, every layer event inside a pass of its chunk and direction;
#   - every send has exactly one matching receive on the stage it names
#     (same step, chunk, tensor and direction) that does not end before the
#     send started, and every receive a send;
#   - tensor-parallel collectives, and with dp > 1 the gradient allreduce
#     buckets on the communication thread, run in the same order on the
#     ranks of their group and overlap in time (none ends before another
#     rank started it);
#   - idle spans cover no layer, reorder or optimizer; one optimizer per step;
#   - with a skewed rank, its offset takes out the skew.
# Prints "# ..." lines; exits 1 with the first failures listed.
import argparse
import collections
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--grid", default="1,1,1", help="D,T,P")
ap.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "none"])
ap.add_argument("--chunks", type=int, default=1)
ap.add_argument("--steps", type=int, required=True, help="steps recorded on every rank")
ap.add_argument("--skew-rank", type=int, default=-1)
ap.add_argument("--skew-ms", type=float, default=0)
a = ap.parse_args()
D, T, P = (int(x) for x in a.grid.split(","))
W, M = D * T * P, a.chunks

failures = []


def fail(msg):
    if len(failures) < 20:
        failures.append(msg)


def ns(x):
    return int(round(float(x) * 1000))


doc = json.load(open(a.file))
events = doc["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
spans = [e for e in events if e.get("ph") == "X"]
for e in spans:
    e["t0"], e["t1"] = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
by_rank = collections.defaultdict(list)
for e in spans:
    by_rank[e["pid"]].append(e)


def pos(r):
    return (r // T) % D, r % T, r // (T * D)


def rank_of(d, t, p):
    return t + T * (d + D * p)


# every rank, named by its place
for r in range(W):
    d, t, p = pos(r)
    if names.get(r) != "rank %d (%d,%d,%d)" % (r, d, t, p):
        fail("rank %d: process name %r, expected 'rank %d (%d,%d,%d)'" % (r, names.get(r), r, d, t, p))
if sorted(names) != list(range(W)):
    fail("processes %s, expected ranks 0..%d" % (sorted(names), W - 1))
summaries = doc.get("dltrain", {}).get("ranks", [])
if sorted(s["rank"] for s in summaries) != list(range(W)):
    fail("summaries of ranks %s" % sorted(s["rank"] for s in summaries))


def offset_error_ns(a, b):
    """How far two ranks' corrected clocks may still disagree: each offset to
    rank 0 is known within half its measured round trip."""
    rtt = {x["rank"]: x["clock_rtt_us"] for x in summaries}
    return 0 if a == b else 500.0 * (rtt.get(a, 0) + rtt.get(b, 0))


# spans nest or are disjoint within a thread
for r, evs in by_rank.items():
    threads = collections.defaultdict(list)
    for e in evs:
        threads[e["tid"]].append(e)
    for tid, th in threads.items():
        th.sort(key=lambda e: (e["t0"], -e["t1"]))
        stack = []
        for e in th:
            while stack and stack[-1]["t1"] <= e["t0"]:
                stack.pop()
            if stack and e["t1"] > stack[-1]["t1"]:
                fail("rank %d thread %d: '%s' [%d, %d] overlaps '%s' [%d, %d]" % (
                    r, tid, e["name"], e["t0"], e["t1"], stack[-1]["name"], stack[-1]["t0"], stack[-1]["t1"]))
            stack.append(e)


def expected_passes(p):
    if a.schedule == "gpipe":
        return [("forward", c) for c in range(M)] + [("backward", c) for c in range(M)]
    warm = min(P - p - 1, M)
    seq = [("forward", c) for c in range(warm)]
    for j in range(M):
        if warm + j < M:
            seq.append(("forward", warm + j))
        seq.append(("backward", j))
    return seq


def inside(e, outer):
    return outer["t0"] <= e["t0"] and e["t1"] <= outer["t1"]


steps = range(1, a.steps + 1)
busy_cats = ("layer", "reorder", "optimizer")
for r in range(W):
    d, t, p = pos(r)
    evs = by_rank[r]
    step_ev = {e["args"]["step"]: e for e in evs if e["cat"] == "step"}
    if sorted(step_ev) != list(steps):
        fail("rank %d: step spans %s, expected %s" % (r, sorted(step_ev), list(steps)))
        continue
    for s in steps:
        mine = [e for e in evs if e["args"].get("step") == s and e["tid"] == 0]
        for e in mine:
            if e["cat"] not in ("eval", "checkpoint") and not inside(e, step_ev[s]):
                fail("rank %d step %d: '%s' outside its step" % (r, s, e["name"]))
        if sum(e["cat"] == "optimizer" for e in mine) != 1:
            fail("rank %d step %d: %d optimizer spans" % (r, s, sum(e["cat"] == "optimizer" for e in mine)))
        if a.schedule == "none":
            continue
        passes = sorted((e for e in mine if e["cat"] == "pass"), key=lambda e: e["t0"])
        got = [(e["args"]["direction"], e["args"]["chunk"]) for e in passes]
        if got != expected_passes(p):
            fail("rank %d (stage %d) step %d: passes %s, expected %s" % (r, p, s, got, expected_passes(p)))
        first = {}
        for e in passes:
            key = (e["args"]["direction"], e["args"]["chunk"])
            first.setdefault(key, e)
        for c in range(M):
            f, b = first.get(("forward", c)), first.get(("backward", c))
            if f and b and f["t1"] > b["t0"]:
                fail("rank %d step %d: chunk %d's backward starts before its forward ended" % (r, s, c))
        layers = [e for e in mine if e["cat"] == "layer"]
        for e in layers:
            if not any(inside(e, q) and q["args"]["chunk"] == e["args"]["chunk"] and
                       q["args"]["direction"] == e["args"]["direction"] for q in passes):
                fail("rank %d step %d: layer '%s' (chunk %s, %s) in no pass of its chunk and direction" % (
                    r, s, e["name"], e["args"].get("chunk"), e["args"].get("direction")))
        for q in passes:
            if not any(inside(e, q) for e in layers):
                fail("rank %d step %d: %s holds no layer" % (r, s, q["name"]))
    # idle spans cover no busy span
    busy = sorted((e for e in evs if e["cat"] in busy_cats and e["tid"] == 0), key=lambda e: e["t0"])
    idle = [e for e in evs if e["cat"] == "idle"]
    for i in idle:
        for b in busy:
            if b["t0"] < i["t1"] and i["t0"] < b["t1"]:
                fail("rank %d: idle [%d, %d] covers '%s' [%d, %d]" % (r, i["t0"], i["t1"], b["name"], b["t0"], b["t1"]))
                break
print("# %d ranks, %d spans, %d idle spans" % (W, len(spans), sum(e["cat"] == "idle" for e in spans)))

# pipeline messages: every send received, no receive before its send
kinds = collections.Counter()
messages = collections.defaultdict(list)
for e in spans:
    m = re.match(r"(send|recv) (activation|gradient)$", e["name"])
    if not m:
        continue
    d, t, p = pos(e["pid"])
    q = e["args"]["peer_stage"]
    src, dst = (p, q) if m.group(1) == "send" else (q, p)
    key = (d, t, e["args"]["step"], e["args"]["chunk"], e["args"]["tensor"], m.group(2), src, dst)
    messages[key].append((m.group(1), e))
    kinds[m.group(1)] += 1
for key, ends in messages.items():
    sends = [e for k, e in ends if k == "send"]
    recvs = [e for k, e in ends if k == "recv"]
    if len(sends) != 1 or len(recvs) != 1:
        fail("message %s: %d sends, %d receives" % (key, len(sends), len(recvs)))
        continue
    s, v = sends[0], recvs[0]
    if s["pid"] != rank_of(key[0], key[1], key[6]) or v["pid"] != rank_of(key[0], key[1], key[7]):
        fail("message %s: sent by rank %d, received by rank %d" % (key, s["pid"], v["pid"]))
    if v["t1"] + offset_error_ns(v["pid"], s["pid"]) < s["t0"]:
        fail("message %s: received by rank %d at %d ns, sent by rank %d at %d ns" % (key, v["pid"], v["t1"], s["pid"], s["t0"]))
if P > 1 and not messages:
    fail("a pipeline of %d stages and no messages" % P)
print("# %d pipeline messages (%d sends, %d receives)" % (len(messages), kinds["send"], kinds["recv"]))


def collectives(group_of, select, what):
    """Spans select() picks, per group and step in order: same names on every
    rank of the group, and each one overlapping in time across the ranks."""
    groups = collections.defaultdict(dict)
    for r in range(W):
        groups[group_of(r)][r] = sorted((e for e in by_rank[r] if select(e)), key=lambda e: e["t0"])
    count = 0
    for g, ranks in groups.items():
        seqs = list(ranks.values())
        if len({tuple((e["name"], e["args"].get("step")) for e in sq) for sq in seqs}) != 1:
            fail("%s of group %s differ between its ranks" % (what, g))
            continue
        for i in range(len(seqs[0])):
            col = [sq[i] for sq in seqs]
            latest_start = max(e["t0"] for e in col)
            earliest_end = min(e["t1"] for e in col)
            first_done = min(col, key=lambda e: e["t1"])["pid"]
            last_in = max(col, key=lambda e: e["t0"])["pid"]
            if earliest_end + offset_error_ns(first_done, last_in) < latest_start:
                fail("%s %d of group %s ('%s', step %s): rank %d ended at %d ns before rank %d started it at %d ns" % (
                    what, i, g, col[0]["name"], col[0]["args"].get("step"), first_done, earliest_end, last_in,
                    latest_start))
            count += 1
    return count


if T > 1:
    n = collectives(lambda r: (pos(r)[0], pos(r)[2]),
                    lambda e: e["cat"] == "tensor-comm" and "slice" not in e["name"], "tensor collectives")
    if not n:
        fail("tp=%d and no tensor-parallel collective" % T)
    print("# %d tensor-parallel collectives agree across their groups" % n)
if D > 1:
    n = collectives(lambda r: (pos(r)[1], pos(r)[2]), lambda e: e["cat"] == "allreduce" and e["tid"] == 1,
                    "gradient allreduces")
    if not n:
        fail("dp=%d and no gradient allreduce" % D)
    print("# %d gradient allreduces agree across their data-parallel groups" % n)

if a.skew_rank >= 0:
    s = [x for x in summaries if x["rank"] == a.skew_rank][0]
    off, rtt = s["clock_offset_us"], s["clock_rtt_us"]
    print("# rank %d: skewed by %g ms, clock offset %.1f us over a %.1f us round trip" % (
        a.skew_rank, a.skew_ms, off, rtt))
    if abs(off + 1000 * a.skew_ms) > rtt / 2 + 1:
        fail("rank %d: offset %.1f us does not take out a skew of %g ms (round trip %.1f us)" % (
            a.skew_rank, off, a.skew_ms, rtt))

for f in failures:
    print("# FAIL " + f)
sys.exit(1 if failures else 0)
