#!/bin/sh
# test_plot.sh: `dltrain plot` as a user meets it, its files read by their
# real readers: PIL for PNG (the size; one colour per run, drawn), Python's
# XML parser for SVG (its polylines hold the runs' values), poppler's
# pdftotext for the words of a PDF (titles, legend labels, tick labels: a
# loss spanning four decades gets a log axis);
# --trace's bars hold each rank's milliseconds per step by part; --tuner's
# table holds every row of dltrain tune's plan;
# every step line of --metrics has its time; bad input exits 2 with the
# file, line and column, and writes nothing.
. "$top_srcdir/tests/tap.sh"
T="$TMPDIR_TEST"
if "$DLTRAIN" --version | grep -q "^charts: no"; then
    echo "1..0 # SKIP this dltrain was built without charts (cairo)"
    exit 0
fi
tap_plan 52
PY=/usr/bin/python3
B="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 500 --epochs 2 --eval-every 10 --threads 1 --quiet"
expect_status 0 "a run with SGD" -- $DLTRAIN $B --metrics "$T/sgd.jsonl"
expect_status 0 "a run with Adam" -- $DLTRAIN $B --optimizer adam --lr 0.001 --metrics "$T/adam.jsonl"
$PY - "$T/sgd.jsonl" <<'EOF'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "step"]
t = [r.get("time_s") for r in rows]
ok = len(t) == 40 and all(x is not None for x in t) and t == sorted(t) and t[-1] > 0
# a step's parts add up, and the steps fill most of the time between reports
# (the rest: evaluations every 10 steps, the epoch's end)
ok = ok and all(abs(r["input_s"] + r["compute_s"] + r["exposed_comm_s"] - r["step_s"]) < 1e-6 for r in rows)
span, busy = t[-1] - t[0], sum(r["step_s"] for r in rows[1:])
print("# steps 2-40: %.3f s of step_s in %.3f s between their reports" % (busy, span))
sys.exit(0 if ok and 0.3 * span < busy <= span * 1.001 + 1e-4 else 1)
EOF
tap_result $? "every step line has time_s (never decreasing) and step_s = input_s + compute_s + exposed_comm_s, filling the time between steps"

# ---------------------------------------------------------------- PNG, SVG, PDF
expect_status 0 "two runs into a PNG" -- $DLTRAIN plot "$T/sgd.jsonl" "$T/adam.jsonl" -o "$T/c.png"
# pixels of the palette's first two colours (tab10 blue, orange)
colours() {
    $PY - "$1" <<'EOF'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
px = list(im.getdata())
near = lambda c: sum(1 for p in px if sum(abs(a - b) for a, b in zip(p, c)) < 30)
print(im.size[0], im.size[1], near((31, 119, 180)), near((255, 127, 14)))
EOF
}
set -- $(colours "$T/c.png")
echo "# c.png: $1 x $2, $3 blue and $4 orange pixels"
[ "$1" -eq 1200 ] && [ "$2" -gt 700 ]; tap_result $? "PIL reads it: 1200 pixels wide (got $1 x $2)"
[ "$3" -gt 300 ] && [ "$4" -gt 300 ]; tap_result $? "both runs are drawn, one colour each"
expect_status 0 "one run, 800 pixels wide" -- $DLTRAIN plot "$T/sgd.jsonl" -o "$T/one.png" --width 800
set -- $(colours "$T/one.png")
[ "$1" -eq 800 ] && [ "$3" -gt 300 ] && [ "$4" -lt 20 ]; tap_result $? "its colour alone (got $3 blue, $4 orange)"
runs="$T/sgd.jsonl $T/adam.jsonl"
if command -v mpirun > /dev/null; then
    # a parameter server and 2 workers, each reporting its own steps
    expect_status 0 "a run of ssp:2 (a parameter server, 2 workers)" -- mpirun --oversubscribe -np 3 $DLTRAIN $B \
        --consistency ssp:2 --metrics "$T/ssp.jsonl"
    runs="$runs $T/ssp.jsonl"
else
    tap_result 0 "# SKIP no mpirun: no parameter-server run"
fi
expect_status 0 "an SVG" -- $DLTRAIN plot $runs -o "$T/c.svg"
# Its polylines hold the runs' values: for each run's losses, accuracies and
# samples/s, a line whose x is an affine map of the steps and y of the values
# (the axes' scales), through every point to within cairo's 1/256 pixel
# (cairo merges the middle points of straight runs into one segment); a
# parameter server's run, the workers' mean at each step.
cat > "$T/polylines.py" <<'EOF'
import json, re, sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg") and root.get("width", "").startswith("1200"), root.attrib
lines = []
for el in root.iter():
    d = el.get("d")
    if el.tag.endswith("path") and d and "stroke:none" not in el.get("style", "") and re.fullmatch(r"[ML0-9.\- ]+", d):
        nums = [float(v) for v in re.findall(r"-?[0-9.]+", d)]
        lines.append(list(zip(nums[0::2], nums[1::2])))
def holds(line, steps, vals):
    if len(line) < 2 or len(line) > len(steps):
        return False
    ax = (line[-1][0] - line[0][0]) / (steps[-1] - steps[0])
    if ax <= 0:
        return False
    idx = []
    for x, _ in line:  # each vertex at a step
        k = (x - line[0][0]) / ax
        if abs(k - round(k)) * abs(ax) > 0.01 or not 0 <= round(k) < len(steps):
            return False
        idx.append(round(k))
    if idx[0] != 0 or idx[-1] != len(steps) - 1 or idx != sorted(set(idx)):
        return False
    u, v = [vals[i] for i in idx], [y for _, y in line]
    n = len(u); mu, mv = sum(u) / n, sum(v) / n
    suu = sum((a - mu) ** 2 for a in u)
    a = sum((p - mu) * (q - mv) for p, q in zip(u, v)) / suu if suu else 0
    if a >= 0:
        return False  # larger values are higher up: smaller y
    for j in range(len(idx) - 1):  # every point, vertex or merged, on the line
        for i in range(idx[j], idx[j + 1] + 1):
            t = (i - idx[j]) / (idx[j + 1] - idx[j])
            y = line[j][1] + t * (line[j + 1][1] - line[j][1])
            if abs(y - (mv + a * (vals[i] - mu))) > 0.02:
                return False
    return True
ok = True
keys = sys.argv[2].split(",")
for path in sys.argv[3:]:
    rows = [r for r in map(json.loads, open(path)) if r["event"] == "step"]
    steps = sorted({r["global_step"] for r in rows})  # a parameter server's workers: their mean per step
    mean = lambda key, s: sum(r[key] for r in rows if r["global_step"] == s) / sum(1 for r in rows if r["global_step"] == s)
    for key in keys:
        if not any(holds(l, steps, [mean(key, s) for s in steps]) for l in lines):
            print("# no polyline holds %s's %s" % (path.split("/")[-1], key))
            ok = False
sys.exit(0 if ok else 1)
EOF
$PY "$T/polylines.py" "$T/c.svg" loss,accuracy,samples_per_s $runs
tap_result $? "Python's XML parser reads it: an <svg> 1200 wide whose polylines hold each run's losses, accuracies and rates"
# a mixture of experts' run: three more panels, its experts' load, the
# choices dropped (at capacity 0.5) and the balancing loss
. "$top_srcdir/tests/text_corpus.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
expect_status 0 "a mixture of experts' run (moe-tiny, capacity 0.5)" -- $DLTRAIN --net "$top_srcdir/nets/moe-tiny.yaml" \
    --data "$top_builddir/tests/text-corpus" --set args.capacity_factor=0.5 --max-steps 12 --limit-test 16 --threads 1 \
    --quiet --metrics "$T/moe.jsonl"
expect_status 0 "  plotted into an SVG" -- $DLTRAIN plot "$T/moe.jsonl" -o "$T/moe.svg"
$PY "$T/polylines.py" "$T/moe.svg" loss,expert_max_load,expert_dropped,aux_loss "$T/moe.jsonl"
tap_result $? "  whose polylines hold its loss, its most loaded expert, the share dropped and the balancing loss"
expect_status 0 "a PDF with labels and a title" -- $DLTRAIN plot "$T/sgd.jsonl" "$T/adam.jsonl" \
    --labels "SGD momentum,Adam" --title "two optimizers" -o "$T/c.pdf"
words=$(pdftotext "$T/c.pdf" - 2>&1 | tr '\n' '|')
ok=0
for w in "two optimizers" "SGD momentum" "|Adam|" "Loss against time" "Accuracy" "Throughput" "seconds since the start" \
    "samples/s" "faint: each training step; line: smoothed (0.6); dots: validation"; do
    echo "$words" | grep -qF -- "$w" || { echo "# not in the PDF: $w"; ok=1; }
done
tap_result $ok "pdftotext finds the title, the legend's labels and note, the panels' titles and axis labels"

# A loss over four decades (a file written as --metrics writes them): log axis.
$PY - "$T/decades.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for s in range(1, 101):
        f.write(json.dumps({"event": "step", "global_step": s, "loss": 100 * 0.9 ** (s - 1), "accuracy": s / 100,
                            "samples_per_s": 1000, "time_s": s / 10}) + "\n")
EOF
expect_status 0 "a loss from 100 down to 0.003" -- $DLTRAIN plot "$T/decades.jsonl" -o "$T/decades.pdf"
words=$(pdftotext "$T/decades.pdf" - 2>&1 | tr '\n' '|')
echo "$words" | grep -q "|0.01|" && echo "$words" | grep -q "|0.1|" && echo "$words" | grep -q "|10|" &&
    echo "$words" | grep -q "|100|"
tap_result $? "its loss axes are logarithmic: ticks 0.01, 0.1, 10, 100"
echo "$words" | grep -q "|20|" && echo "$words" | grep -q "|80|"
tap_result $? "the accuracy axis stays linear (20, 80)"
cp "$T/sgd.jsonl" "$T/live.jsonl.partial"
expect_status 0 "a running job's .partial file" -- $DLTRAIN plot "$T/live.jsonl.partial" -o "$T/live.pdf"
pdftotext "$T/live.pdf" - | grep -qx "live"; tap_result $? "labelled with its run's name"

# ---------------------------------------------------------------- --trace
if command -v mpirun > /dev/null; then
    expect_status 0 "a traced run of 2 pipeline ranks" -- mpirun --oversubscribe -np 2 $DLTRAIN $B --max-steps 12 \
        --grid pp=2 --trace "$T/t.json"
else
    expect_status 0 "a traced run (no mpirun: one rank)" -- $DLTRAIN $B --max-steps 12 --trace "$T/t.json"
fi
expect_status 0 "plot --trace into an SVG" -- $DLTRAIN plot --trace "$T/t.json" -o "$T/t.svg"
# The bars hold the trace's times: each rank's milliseconds per step by
# part, computed here from the trace's events, are the widths of its bar's
# pieces in the part's colour, one scale for the whole panel, side by side
# from one left edge.
$PY - "$T/t.json" "$T/t.svg" <<'EOF'
import json, re, sys, xml.etree.ElementTree as E
ev = json.load(open(sys.argv[1]))["traceEvents"]
parts = [("layer", "reorder", "optimizer"), ("data",), ("tensor-comm", "send", "recv"), ("grad-wait",)]
want = {}
for pid in sorted({e["pid"] for e in ev if e.get("ph") == "X"}):
    x = [e for e in ev if e.get("pid") == pid and e.get("ph") == "X"]
    steps = [e["dur"] / 1000 for e in x if e["cat"] == "step"]
    if not steps:
        continue
    ms = [sum(e["dur"] / 1000 for e in x if e["cat"] in p) / len(steps) for p in parts]
    want[pid] = ms + [sum(steps) / len(steps) - sum(ms)]
tab10 = ["12.2%,46.7%,70.6%", "100%,49.8%,5.5%", "17.3%,62.7%,17.3%", "83.9%,15.3%,15.7%", "58%,40.4%,74.1%"]
rects = []  # (y, colour index, width) of the first panel's pieces
for el in E.parse(sys.argv[2]).getroot().iter():
    m = re.search(r"fill:rgb\(([^)]*)\)", el.get("style", ""))
    d = el.get("d", "")
    if m and m.group(1) in tab10 and d.count("L") == 3 and "Z" in d:
        v = [float(t) for t in re.findall(r"-?[0-9.]+", d)]
        rects.append((round(v[1], 2), tab10.index(m.group(1)), v[2] - v[0], v[0]))
rows = sorted({r[0] for r in rects})
pids = sorted(want)
ok = len(rows) == len(pids)
pairs = [(want[pids[rows.index(y)]][c], w) for y, c, w, _ in rects] if ok else []
starts = set()
for y in rows:  # a row's pieces side by side, in the parts' order, from the same left edge
    row = sorted((x0, c, w) for yy, c, w, x0 in rects if yy == y)
    starts.add(round(row[0][0], 2))
    ok &= [c for _, c, _ in row] == sorted(c for _, c, _ in row)
    ok &= all(abs(row[i][0] + row[i][2] - row[i + 1][0]) < 0.02 for i in range(len(row) - 1))
ok &= len(starts) == 1
k = sum(w for _, w in pairs) / sum(v for v, _ in pairs) if pairs else 0
for v, w in pairs:
    ok &= abs(w - k * v) < 0.02
expected = sum(1 for p in pids for v in want[p] if k * v >= 0.004)
print("# %d ranks, %d pieces drawn (%d expected), %.2f px per ms" % (len(rows), len(rects), expected, k))
sys.exit(0 if ok and len(rects) == expected else 1)
EOF
tap_result $? "each rank's bar holds the trace's milliseconds per step by part, at one scale"
expect_status 0 "plot --trace into a PDF" -- $DLTRAIN plot --trace "$T/t.json" -o "$T/t.pdf"
words=$(pdftotext "$T/t.pdf" - 2>&1 | tr '\n' '|')
ok=0
for w in "rank 0 (0,0,0)" "compute (layers, reorders, optimizer)" "input wait" "waiting for gradients" \
    "Gradient allreduce (the communication thread, overlapping backward)" "milliseconds per recorded step"; do
    echo "$words" | grep -qF -- "$w" || { echo "# not in the PDF: $w"; ok=1; }
done
tap_result $ok "pdftotext finds the ranks' names, the parts and the panels"
expect_status 2 "--trace on a metrics file exits 2" -- $DLTRAIN plot --trace "$T/sgd.jsonl" -o "$T/y.svg"
expect_output "sgd.jsonl:2:[0-9]+: " "naming where it stops being one JSON document"

# ---------------------------------------------------------------- --tuner
DB="$T/tune.sqlite"
expect_status 0 "dltrain tune measures LeNet-5 at batch 16" -- $DLTRAIN tune --net "$top_srcdir/nets/lenet5.yaml" \
    --batch 16 --threads 1 --repeats 1 --tune-db "$DB"
echo "$OUT" > "$T/tune.txt"
expect_status 0 "plot --tuner draws its plan into a PDF" -- $DLTRAIN plot --tuner "$DB" --net "$top_srcdir/nets/lenet5.yaml" \
    --batch 16 --threads 1 -o "$T/plan.pdf"
expect_status 0 "and into an SVG" -- $DLTRAIN plot --tuner "$DB" --net "$top_srcdir/nets/lenet5.yaml" --batch 16 \
    --threads 1 -o "$T/plan.svg"
# Every row tune printed is a row of the table (pdftotext -layout keeps rows),
# and the rows that split the batch are the highlighted ones.
pdftotext -layout "$T/plan.pdf" "$T/plan.txt"
$PY - "$T/tune.txt" "$T/plan.txt" "$T/plan.svg" <<'EOF'
import re, sys
tune = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(tune) if l.startswith("layer ")][0]
rows = [l.split() for l in tune[start + 1:] if l and not l.startswith(("(", " ", "total", "candidates"))]
drawn = [l.split() for l in open(sys.argv[2]).read().splitlines()]
missing = [r for r in rows if r not in drawn]
batch = 16
split = sum(1 for r in rows if any(int(mb) < batch for mb, _ in re.findall(r"(\d+)x(\d+)", " ".join(r[3:]))))
svg = open(sys.argv[3]).read()
lit = len(re.findall(r"fill:rgb\(100%,49.8%,5.5%\);fill-opacity:0.25", svg))
print("# %d rows printed by tune, %d missing from the table; %d split the batch, %d highlighted" % (len(rows), len(missing), split, lit))
for r in missing[:3]:
    print("#   missing: " + " ".join(r))
sys.exit(0 if rows and not missing and split == lit else 1)
EOF
tap_result $? "the table holds every row dltrain tune printed, the micro-batched rows highlighted"
expect_status 2 "--tuner on a database that does not exist exits 2" -- $DLTRAIN plot --tuner "$T/none.sqlite" \
    --net "$top_srcdir/nets/lenet5.yaml" -o "$T/z.svg"
[ ! -e "$T/none.sqlite" ]; tap_result $? "and creates none"
expect_status 2 "--tuner without --net exits 2" -- $DLTRAIN plot --tuner "$DB" -o "$T/z.svg"

# ---------------------------------------------------------------- bad input
printf '{"event":"step","global_step":1,"loss":2}\n\n{"event": "step", "loss": }\n' > "$T/bad.jsonl"
expect_status 2 "a broken JSON line exits 2" -- $DLTRAIN plot "$T/bad.jsonl" -o "$T/bad.svg"
expect_output "bad.jsonl:3:[0-9]+: " "naming the file, line and column"
[ ! -e "$T/bad.svg" ]; tap_result $? "and writes no chart"
echo '{"event":"epoch","epoch":1}' > "$T/nosteps.jsonl"
expect_status 2 "a file without step lines exits 2" -- $DLTRAIN plot "$T/nosteps.jsonl" -o "$T/x.svg"
: > "$T/empty.jsonl"
expect_status 2 "an empty file exits 2" -- $DLTRAIN plot "$T/empty.jsonl" -o "$T/x.svg"
expect_output "empty.jsonl: no \"step\" lines" "saying it has no step lines"
# ten whole lines, then the first 20 bytes of the eleventh (a cut by bytes can fall on a line's end)
{ head -n 10 "$T/sgd.jsonl"; sed -n 11p "$T/sgd.jsonl" | head -c 20; } > "$T/cut.jsonl"
expect_status 2 "a file cut in the middle of a line exits 2" -- $DLTRAIN plot "$T/cut.jsonl" -o "$T/x.svg"
expect_output "cut.jsonl:11:[0-9]+: " "naming its last line"
expect_status 2 "a network file (not metrics) exits 2" -- $DLTRAIN plot "$top_srcdir/nets/lenet5.yaml" -o "$T/x.svg"
expect_output "lenet5.yaml:1:[0-9]+: " "naming its first line"
[ ! -e "$T/x.svg" ]; tap_result $? "none of them writes a chart"
expect_status 2 "an unknown format exits 2" -- $DLTRAIN plot "$T/sgd.jsonl" -o "$T/c.jpg"
expect_output "must end in .svg, .pdf or .png" "naming the formats"
expect_status 2 "--labels with too few names exits 2" -- $DLTRAIN plot "$T/sgd.jsonl" "$T/adam.jsonl" --labels one -o "$T/x.svg"
expect_status 1 "a folder that does not exist fails" -- $DLTRAIN plot "$T/sgd.jsonl" -o "$T/no/such/c.svg"
# Outputs that are not regular files (issue 40): a FIFO gets the chart and
# stays a FIFO; a directory is refused (status 1), and stays.
mkfifo "$T/fifo.svg"
cat "$T/fifo.svg" > "$T/fifo.out" &
reader=$!
timeout 60 $DLTRAIN plot "$T/sgd.jsonl" -o "$T/fifo.svg" > /dev/null 2>&1; st=$?
timeout 10 sh -c "while kill -0 $reader 2>/dev/null; do sleep 0.05; done"
kill $reader 2> /dev/null # a reader whose FIFO was replaced waits for ever
[ $st -eq 0 ] && [ -p "$T/fifo.svg" ] && grep -q "<svg" "$T/fifo.out"
tap_result $? "plot -o FIFO: its reader gets the chart, and it stays a FIFO (status $st)"
mkdir "$T/dir.svg"
$DLTRAIN plot "$T/sgd.jsonl" -o "$T/dir.svg" > /dev/null 2> "$T/dir.err"; st=$?
[ $st -eq 1 ] && grep -q "dir.svg: cannot write it: it is a directory" "$T/dir.err" && [ -d "$T/dir.svg" ]
tap_result $? "plot -o a directory: status 1 (got $st), saying what it is"
exit $((tap_failed > 0))
