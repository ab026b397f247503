"""check_tensorboard.py: reads dltrain's --tensorboard folders with
TensorBoard's own loader (event_accumulator, as `tensorboard --logdir` does)
for tests/test_tensorboard.sh.

  compare DIR JSONL...   every scalar, tag and step equals the --metrics JSON
                         lines of the same run (several files: a run and its
                         resumptions, each later one replacing the steps from
                         its first step on, as TensorBoard's START events do);
                         no tag or step more, none missing, none twice
  truncate DIR           the folder's one event file cut at each byte of its
                         last record: TensorBoard reads every record before it,
                         and nothing of the cut one
  corrupt DIR            a byte of its middle record's length or data flipped:
                         TensorBoard's checksums stop it there
Exits 1 with the differences printed, 0 when all match.
"""
import glob
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
from tensorboard.backend.event_processing import event_accumulator

# --metrics keys -> TensorBoard tags (src/cli/train.c)
STEP_TAGS = {"loss": "train/loss", "accuracy": "train/accuracy", "lr": "train/lr",
             "samples_per_s": "train/samples_per_s", "tokens_per_s": "train/tokens_per_s", "mfu": "train/mfu",
             "comm_s": "comm/seconds", "exposed_comm_s": "comm/exposed_seconds", "bytes_sent": "comm/bytes_sent",
             "staleness": "staleness", "consensus_distance": "consensus/distance",
             "grad_norm": "train/grad_norm", "step_s": "time/step_seconds", "input_s": "time/input_seconds",
             "compute_s": "time/compute_seconds", "aux_loss": "train/aux_loss", "expert_max_load": "moe/max_load",
             "expert_dropped": "moe/dropped", "skipped": "train/skipped", "skipped_steps": "train/skipped_steps"}
EPOCH_TAGS = {"train_loss": "epoch/train_loss", "train_accuracy": "epoch/train_accuracy",
              "test_loss": "epoch/test_loss", "test_accuracy": "epoch/test_accuracy", "seconds": "epoch/seconds",
              "samples_per_s": "epoch/samples_per_s", "test_top5_accuracy": "epoch/test_top5_accuracy"}


def read(folder):
    """{tag: [(step, value), ...]} as TensorBoard's loader gives them."""
    ea = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0})
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def expected(jsonl):
    """{tag: {step: value}} from one run's JSON lines, and its first step."""
    out, last, first = {}, 0, None
    for line in open(jsonl):
        r = json.loads(line)
        ev = r["event"]
        if ev == "step":
            last = r["global_step"]
            first = last if first is None else first
            worker = r.get("worker")  # a parameter server's worker: curves of its own
            for k, tag in STEP_TAGS.items():
                if r.get(k) is not None:
                    tag = "worker%d/%s" % (worker, k) if worker is not None else tag
                    out.setdefault(tag, {})[last] = r[k]
        elif ev == "experts":  # a routing layer's load: its most loaded expert over the mean, the share dropped
            taken, step = r["taken"], r["global_step"]
            if sum(taken) > 0:
                out.setdefault("moe/%s/max_load" % r["layer"], {})[step] = max(taken) * len(taken) / sum(taken)
            if r["choices"] > 0:
                out.setdefault("moe/%s/dropped" % r["layer"], {})[step] = r["dropped"] / r["choices"]
        elif ev == "eval":
            for k, tag in (("test_loss", "eval/loss"), ("test_accuracy", "eval/accuracy"),
                           ("test_top5_accuracy", "eval/top5_accuracy")):
                if r.get(k) is not None:  # a regression loss has no accuracy; 5 classes or fewer no top-5
                    out.setdefault(tag, {})[r["global_step"]] = r[k]
        elif ev == "epoch":
            for k, tag in EPOCH_TAGS.items():
                if r.get(k) is not None:
                    out.setdefault(tag, {})[last] = r[k]
    first = first if first is not None else 1
    memory = [json.loads(l) for l in open(jsonl) if '"event":"memory"' in l]
    for m in memory:
        bytes_ = m["arena_bytes"] + 4.0 * (2 * m["weights"] + m["optimizer_state"] + m["state"])
        out.setdefault("memory/rank%d_bytes" % m["rank"], {})[first - 1] = bytes_
    return out, first


def compare(folder, jsonls):
    want = {}
    for j in jsonls:
        run, first = expected(j)
        for tag in want:  # a resumption replaces the steps from its first on
            want[tag] = {s: v for s, v in want[tag].items() if s < first or tag.startswith("memory/")}
        for tag, points in run.items():
            want.setdefault(tag, {}).update(points)
    got = read(folder)
    bad = []
    for tag in sorted(set(want) | set(got)):
        if tag not in got:
            bad.append("tag %s missing" % tag)
            continue
        if tag not in want:
            bad.append("tag %s not in the JSON lines" % tag)
            continue
        steps = [s for s, _ in got[tag]]
        if len(steps) != len(set(steps)):
            bad.append("%s: a step twice: %s" % (tag, sorted(s for s in steps if steps.count(s) > 1)[:6]))
        if set(steps) != set(want[tag]):
            bad.append("%s: steps %s, expected %s" % (tag, sorted(set(steps))[:8], sorted(want[tag])[:8]))
        for s, v in got[tag]:
            w = want[tag].get(s)
            # the JSON line has 9 significant digits of the double, the event
            # its float32: the two round to float32 at most one ulp apart
            if w is not None and not (abs(np.float32(w) - np.float32(v)) <= np.spacing(np.float32(w))
                                      or (math.isnan(w) and math.isnan(v))):
                bad.append("%s at step %d: %r, expected %r" % (tag, s, v, w))
    n = sum(len(v) for v in got.values())
    print("%d tags, %d scalars read; %d differences" % (len(got), n, len(bad)))
    for b in bad[:20]:
        print("  " + b)
    return not bad


def record_offsets(path):
    """Start offsets of the TFRecord records (the length fields alone)."""
    data, offs, i = open(path, "rb").read(), [], 0
    while i < len(data):
        offs.append(i)
        (n,) = struct.unpack("<Q", data[i:i + 8])
        i += 12 + n + 4
    return offs, len(data)


def truncate(folder):
    (path,) = glob.glob(os.path.join(folder, "*tfevents*"))
    offs, size = record_offsets(path)
    tmp = tempfile.mkdtemp()
    try:
        def read_cut(cut):
            d = os.path.join(tmp, str(cut))
            os.mkdir(d)
            with open(path, "rb") as f, open(os.path.join(d, os.path.basename(path)), "wb") as g:
                g.write(f.read(cut))
            got = read(d)
            shutil.rmtree(d)
            return got
        before = read_cut(offs[-1])
        full = read(folder)
        if before == full:
            print("the last record held no scalar: nothing to check")
            return False
        bad = [c for c in range(offs[-1] + 1, size) if read_cut(c) != before]
        print("%d records; cut at each of the last record's %d bytes: %d reads differ from the records before it"
              % (len(offs), size - offs[-1], len(bad)))
        if bad:
            print("  first at byte %d" % bad[0])
        return not bad
    finally:
        shutil.rmtree(tmp)


def corrupt(folder):
    """A byte flipped in the length, or in the data, of the middle record: the
    reader reads the records before it, as if the file ended there."""
    (path,) = glob.glob(os.path.join(folder, "*tfevents*"))
    offs, size = record_offsets(path)
    data = open(path, "rb").read()
    k = len(offs) // 2
    tmp = tempfile.mkdtemp()
    try:
        def read_bytes(b, name):
            d = os.path.join(tmp, name)
            os.mkdir(d)
            with open(os.path.join(d, os.path.basename(path)), "wb") as g:
                g.write(b)
            return read(d)
        before = read_bytes(data[:offs[k]], "before")
        ok = True
        for where, at in (("length", offs[k] + 2), ("data", offs[k] + 12 + 3)):
            bad = bytearray(data)
            bad[at] ^= 0x40
            got = read_bytes(bytes(bad), where)
            print("record %d of %d, a byte of its %s flipped: %s" % (k, len(offs), where,
                  "the records before it, no more" if got == before else "read otherwise"))
            ok &= got == before
        return ok and before != read(folder)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    mode = sys.argv[1]
    ok = compare(sys.argv[2], sys.argv[3:]) if mode == "compare" else truncate(sys.argv[2]) if mode == "truncate" \
        else corrupt(sys.argv[2])
    sys.exit(0 if ok else 1)
