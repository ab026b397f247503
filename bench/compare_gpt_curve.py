"""compare_gpt_curve.py (run through bench/compare-gpt-curve): gpt-tiny's
loss curve in dltrain against the same run in PyTorch (transformers'
GPT2LMHeadModel): the same start (dltrain's initial weights, exported), the
same batches in the same order (dltrain's --debug-dump-batches), the same
AdamW with dltrain's learning rate at every step (from its --metrics).
PyTorch runs in float32 and in float64; float32 noise is how far PyTorch's
own float32 run drifts from its float64 run, and dltrain should follow the
float64 curve about as closely.  Prints the curves every tenth of the run,
the largest differences, writes the three runs as JSON lines and draws them
with `dltrain plot`.  A benchmark, not a test (the drift of two float32 runs
grows with the run, chaotically).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--dltrain", required=True)
ap.add_argument("--data", required=True, help="a text file or folder (dataset text)")
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--out", default="gpt-curve", help="folder for the runs' files and the chart")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
net = ["--net", "gpt-tiny", "--data", a.data, "--threads", str(a.threads)]


def run(*args):
    r = subprocess.run([a.dltrain, *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit("dltrain %s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.stdout


# dltrain's initial weights: a step at learning rate 0 leaves them as drawn
ck0 = os.path.join(a.out, "init-ckpt")
run(*net, "--lr", "0", "--max-steps", "1", "--checkpoint-dir", ck0, "--checkpoint-every", "1", "--quiet")
init = os.path.join(a.out, "init.safetensors")
run("export", *net, "--checkpoint", ck0, "-o", init)
# dltrain's run, its batches and its learning rates
d_jsonl, batches = os.path.join(a.out, "dltrain.jsonl"), os.path.join(a.out, "batches.bin")
t0 = time.time()
run(*net, "--max-steps", str(a.steps), "--metrics", d_jsonl, "--debug-dump-batches", batches, "--quiet")
d_seconds = time.time() - t0
d_steps = [r for r in map(json.loads, open(d_jsonl)) if r["event"] == "step"]
B, T, V = 16, 64, 256  # nets/gpt-tiny.yaml
ids = np.fromfile(batches, dtype=np.int32).reshape(-1, 2, B, T)  # per step: inputs, then labels
assert len(ids) == len(d_steps) == a.steps, (len(ids), len(d_steps))


def torch_run(dtype):
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    m = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0,
                                   embd_pdrop=0, attn_pdrop=0))
    m.load_state_dict(load_file(init), strict=True)
    m = m.to(dtype).train()
    opt = torch.optim.AdamW(m.parameters(), lr=0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    out, t0 = [], time.time()
    for s in range(a.steps):
        x, y = (torch.from_numpy(ids[s, k].astype(np.int64)) for k in (0, 1))
        for g in opt.param_groups:
            g["lr"] = d_steps[s]["lr"]
        opt.zero_grad()
        logits = m(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        opt.step()
        acc = (logits.argmax(-1) == y).double().mean().item()
        out.append({"event": "step", "global_step": s + 1, "loss": loss.item(), "accuracy": acc,
                    "lr": d_steps[s]["lr"], "samples_per_s": B * (s + 1) / (time.time() - t0),
                    "tokens_per_s": B * T * (s + 1) / (time.time() - t0),
                    "time_s": time.time() - t0})
    path = os.path.join(a.out, "pytorch-%s.jsonl" % str(dtype).split(".")[-1])
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in out)
    return [r["loss"] for r in out], path, time.time() - t0


l32, p32, s32 = torch_run(torch.float32)
l64, p64, s64 = torch_run(torch.float64)
ld = [r["loss"] for r in d_steps]
print("gpt-tiny, %d steps of %d x %d tokens, %d threads; PyTorch %s, transformers GPT2LMHeadModel" % (
    a.steps, B, T, a.threads, torch.__version__))
print("%6s %12s %12s %12s %12s %12s" % ("step", "dltrain", "pytorch f32", "pytorch f64", "|dl - f64|", "|f32 - f64|"))
for s in sorted(set(list(range(0, a.steps, max(1, a.steps // 10))) + [a.steps - 1])):
    print("%6d %12.6f %12.6f %12.6f %12.2e %12.2e" % (s + 1, ld[s], l32[s], l64[s], abs(ld[s] - l64[s]),
                                                       abs(l32[s] - l64[s])))
rel = lambda u, v, n: max(abs(p - q) / abs(q) for p, q in zip(u[:n], v[:n]))
for n in (1, 10, a.steps):
    n = min(n, a.steps)
    print("first %4d steps: largest relative difference to float64: dltrain %.2e, PyTorch float32 %.2e" % (
        n, rel(ld, l64, n), rel(l32, l64, n)))
print("time: dltrain %.1f s (with its evaluation), PyTorch float32 %.1f s" % (d_seconds, s32))
chart = os.path.join(a.out, "curves.png")
subprocess.run([a.dltrain, "plot", d_jsonl, p32, p64, "--labels", "dltrain,PyTorch float32,PyTorch float64",
                "--title", "gpt-tiny: dltrain against PyTorch from the same start and batches", "-o", chart],
               check=True)
print("runs and chart in %s" % a.out)
