#!/bin/sh
# test_include_ladder.sh: the folders of src/ form a ladder: reading every
# #include "FOLDER/..." line of src/ (C, headers, CUDA), no folder reaches
# itself through the folders it includes (no cycle, however long), so each
# folder builds on those below it only.  Prints the ladder, lowest first,
# and any cycle found with the files that make it.
. "$top_srcdir/tests/tap.sh"
tap_plan 1
/usr/bin/python3 - "$top_srcdir/src" <<'PY'
import os, re, sys
src = sys.argv[1]
edges = {}  # (from folder, to folder) -> a file that includes
for d, _, files in os.walk(src):
    rel = os.path.relpath(d, src)
    if rel == ".":
        continue  # main.c sits above every folder
    folder = rel.split(os.sep)[0]
    for f in files:
        if not f.endswith((".c", ".h", ".cu")):
            continue
        for line in open(os.path.join(d, f), errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
            if m and m.group(1) != folder and os.path.isdir(os.path.join(src, m.group(1))):
                edges.setdefault((folder, m.group(1)), os.path.join(rel, f))
graph = {}
for a, b in edges:
    graph.setdefault(a, set()).add(b)
    graph.setdefault(b, set())
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
    seen, todo = set(), [a]
    while todo:
        for b in graph[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen

reaches = {n: reach(n) for n in left}
cycles = {frozenset([n] + [m for m in left if m in reaches[n] and n in reaches[m]]) for n in left if n in reaches[n]}
for c in sorted(cycles, key=sorted):
    print("# cycle: " + ", ".join(sorted(c)))
    for a in sorted(c):
        for b in sorted(graph[a] & c):
            print("#   %s -> %s (%s)" % (a, b, edges[(a, b)]))
sys.exit(1 if left else 0)
PY
tap_result $? "no cycle among the folders of src/"
