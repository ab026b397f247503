#!/bin/sh
# test_include_ladder.sh: the folders of src/ form a ladder: reading every
# #include "FOLDER/..." line of src/ (C, headers, CUDA), no folder reaches
# itself through the folders it includes (no cycle, however long), so each
# folder builds on those below it only.  Prints the ladder, lowest first,
# and any cycle found with the files that make it.  doc/ARCHITECTURE.md's
# ladder table says the same: every folder of src/ has its row (and main.c
# its own), each row lists exactly the folders its files include, and those
# sit on lower rungs; every file that page names in backticks exists (a name
# in the folder table's row of FOLDER/ under src/FOLDER/).
. "$top_srcdir/tests/tap.sh"
tap_plan 3
cat > "$TMPDIR_TEST/ladder.py" <<'PY'
import glob, os, re, sys
top, what = sys.argv[1], sys.argv[2]
src = os.path.join(top, "src")
doc_path = os.path.join(top, "doc", "ARCHITECTURE.md")
edges = {}  # (from folder, to folder) -> a file that includes; main.c's as "main.c"
for d, _, files in os.walk(src):
    rel = os.path.relpath(d, src)
    folder = "main.c" if rel == "." else rel.split(os.sep)[0]
    for f in files:
        if not f.endswith((".c", ".h", ".cu")) or (rel == "." and f != "main.c"):
            continue
        for line in open(os.path.join(d, f), errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
            if m and m.group(1) != folder and os.path.isdir(os.path.join(src, m.group(1))):
                edges.setdefault((folder, m.group(1)), f if rel == "." else os.path.join(rel, f))
folders = sorted(n for n in os.listdir(src) if os.path.isdir(os.path.join(src, n)))
graph = {n: set() for n in folders}
for a, b in edges:
    if a != "main.c":  # main.c sits above every folder
        graph[a].add(b)

def cycle():
    # Kahn's algorithm: the folders left over lie on a cycle.
    indeg = {n: 0 for n in graph}
    for a in graph:
        for b in graph[a]:
            indeg[b] += 1
    order, ready = [], sorted(n for n in graph if indeg[n] == 0)
    while ready:
        n = ready.pop(0)
        order.append(n)
        for b in sorted(graph[n]):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    left = [n for n in graph if n not in order]
    print("# ladder, lowest first: " + " < ".join(reversed(order)))

    def reach(a):
        seen, stack = set(), [a]
        while stack:
            for b in graph[stack.pop()]:
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        return seen

    reaches = {n: reach(n) for n in left}
    cycles = {frozenset([n] + [m for m in left if m in reaches[n] and n in reaches[m]]) for n in left if n in reaches[n]}
    for c in sorted(cycles, key=sorted):
        print("# cycle: " + ", ".join(sorted(c)))
        for a in sorted(c):
            for b in sorted(graph[a] & c):
                print("#   %s -> %s (%s)" % (a, b, edges[(a, b)]))
    return 1 if left else 0

def table():
    # The first fenced block under "## The ladder": "RUNG FOLDER INCLUDES..."
    # rows ("-": none; "every folder on a lower rung but A B": the rest),
    # then "main.c INCLUDES...".
    text = open(doc_path).read()
    m = re.search(r"^## The ladder\n(.*?)^```\n(.*?)^```", text, re.M | re.S)
    if not m:
        print("# doc/ARCHITECTURE.md: no fenced ladder table under '## The ladder'")
        return 1
    bad, rung, says = [], {}, {}
    for line in m.group(2).splitlines():
        r = re.match(r"\s*(\d+)\s+([a-z_]+)\s+(.*?)\s*$", line) or re.match(r"\s*()(main\.c)\s+(.*?)\s*$", line)
        if not r:
            continue
        n, name, rest = r.groups()
        if name in says:
            bad.append("%s has two rows" % name)
        rung[name] = int(n) if n else 1 << 30
        e = re.match(r"every folder on a lower rung but\s+(.*)", rest)
        if e:
            says[name] = {f for f in says if f != "main.c" and rung[f] < rung[name]} - set(e.group(1).split())
        else:
            says[name] = set() if rest == "-" else set(rest.split())
    rungs = [rung[f] for f in says if f != "main.c"]
    if rungs != sorted(rungs) or len(set(rungs)) != len(rungs):
        bad.append("rungs out of order or repeated: %s" % " ".join(map(str, rungs)))
    for f in folders:
        if f not in says:
            bad.append("src/%s/ has no row" % f)
    for f in sorted(says):
        if f != "main.c" and f not in folders:
            bad.append("%s: a row, but no folder src/%s/" % (f, f))
            continue
        real = {b for (a, b) in edges if a == f}
        for b in sorted(real - says[f]):
            bad.append("%s includes from %s (%s), which its row leaves out" % (f, b, edges[(f, b)]))
        for b in sorted(says[f] - real):
            bad.append("%s: its row says it includes from %s, which none of its files does" % (f, b))
        for b in sorted(says[f]):
            if b in rung and rung[b] >= rung[f]:
                bad.append("%s (rung %d) includes from %s, not on a lower rung (%d)" % (f, rung[f], b, rung[b]))
            elif b not in rung:
                bad.append("%s: its row names %s, which has no row" % (f, b))
    # an order written out in the prose (`a < b < ...`) is the table's
    ladder = [f for f in sorted(says, key=rung.get) if f != "main.c"]
    for chain in re.findall(r"`([a-z_]+(?:\s*<\s*[a-z_]+)+)`", text):
        listed = [s.strip() for s in chain.split("<")]
        if listed != ladder:
            bad.append("the order `%s` is not the table's (%s)" % (chain, " < ".join(ladder)))
    for b in bad:
        print("# doc/ARCHITECTURE.md's ladder: " + b)
    return 1 if bad else 0

def files():
    # A name in backticks that ends as a file of the source tree does (or is
    # a folder: ends in /) must exist: in a folder table row of FOLDER/,
    # under src/FOLDER/ (or as a path from src/ or the top); elsewhere,
    # anywhere in the tree.  Placeholders (NAME) and patterns (*) are left.
    bad = []
    for line in open(doc_path):
        row = re.match(r"\| `([a-z_]+)/` \|", line)
        for name in re.findall(r"`([^`\s]+)`", line)[1 if row else 0:]:
            if not re.search(r"\.(c|h|cu|md|sh|mk|py|ac|am|\d)$|/$", name) or "NAME" in name or "*" in name:
                continue
            n = name.rstrip("/")
            where = ["src/" + row.group(1) + "/**/" + n] if row else ["**/" + n]
            if not any(glob.glob(os.path.join(top, p), recursive=True) for p in where + ["src/" + n, n]):
                bad.append("%s%s" % (name, " (in the row of %s/)" % row.group(1) if row else ""))
    for b in bad:
        print("# doc/ARCHITECTURE.md names a file that does not exist: " + b)
    return 1 if bad else 0

sys.exit({"cycle": cycle, "table": table, "files": files}[what]())
PY
/usr/bin/python3 "$TMPDIR_TEST/ladder.py" "$top_srcdir" cycle
tap_result $? "no cycle among the folders of src/"
/usr/bin/python3 "$TMPDIR_TEST/ladder.py" "$top_srcdir" table
tap_result $? "doc/ARCHITECTURE.md's ladder table lists each folder's includes, from lower rungs"
/usr/bin/python3 "$TMPDIR_TEST/ladder.py" "$top_srcdir" files
tap_result $? "every file doc/ARCHITECTURE.md names exists"
