"""layerwise_check.py: the PyTorch side of test_layerwise.sh: LARS and LAMB
written from the papers' update rules (no PyTorch release has them), and
Muon as torch.optim.Muon (PyTorch 2.9 on) does it but in the test's dtype
(its Newton-Schulz runs in bf16), run on the same MLP, weights and batch
as dltrain's (tests/torch_step steps), in float64 and float32.

LARS (You, Gitman and Ginsburg 2017, Algorithm 1), per parameter tensor:
  ratio = eta ||w|| / (||g|| + wd ||w||);  b = mu b + lr ratio (g + wd w);  w -= b
LAMB (You et al. 2019, Algorithm 2, with Adam's bias corrections):
  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
  r = (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd w;  w -= lr (||w|| / ||r||) r
The ratio is 1 where either norm is 0; a tensor no_decay leaves out gets
ratio 1 and no weight decay.
Muon (Jordan et al. 2024) on fc1's and fc2's weights (the hidden layers'
matrices), AdamW on the biases and the output layer fc3:
  b = mu b + (1-mu) g;  u = g + mu (b - g);  X = u / ||u|| (transposed if taller than wide)
  5 times: A = X X^T;  X = a X + (b A + c A A) X  (3.4445, -4.7750, 2.0315)
  w *= 1 - lr wd;  w -= lr sqrt(max(1, rows/cols)) X  dltrain's final weights must be within
FACTOR times PyTorch float32's distance to float64 (torch_check.py's rule).

usage: layerwise_check.py NET WORK TOOL STEPS OPTIMIZER KEY=VALUE...
  the MLP of NET is the one test_layerwise.sh writes: fc1, relu1, fc2,
  relu2, fc3 on [features] inputs; KEY=VALUE: lr, momentum, weight_decay,
  trust_coefficient, beta1, beta2, eps, no_decay (bias or none)
Prints "# ..." lines and exits 0 when within the tolerance, 1 otherwise.
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_check as tc  # noqa: E402 (beside this file)

LAYERS = ("fc1", "fc2", "fc3")


def forward(w, x):
    h = x
    for i, name in enumerate(LAYERS):
        h = F.linear(h, w[name + ".weight"], w[name + ".bias"])
        if i < len(LAYERS) - 1:
            h = torch.relu(h)
    return h


def train(w0, x, y, steps, kind, hp, dtype):
    w = {k: torch.tensor(np.array(v, dtype=np.float64), dtype=dtype, requires_grad=True) for k, v in w0.items()}
    xt, yt = torch.tensor(x.reshape(len(x), -1), dtype=dtype), torch.tensor(y, dtype=torch.long)
    state = {k: [torch.zeros_like(v), torch.zeros_like(v)] for k, v in w.items()}
    wd = hp["weight_decay"]
    for t in range(1, steps + 1):
        for v in w.values():
            v.grad = None
        F.cross_entropy(forward(w, xt), yt).backward()
        with torch.no_grad():
            for k, p in w.items():
                g, adapt = p.grad, not (hp["no_decay"] == "bias" and k.endswith(".bias"))
                d = wd if adapt else 0.0
                if kind == "muon" and k.endswith(".weight") and not k.startswith(LAYERS[-1]):
                    b = state[k][0]
                    b.add_((1 - hp["momentum"]) * (g - b))
                    u = g + hp["momentum"] * (b - g)
                    x = u.T if u.shape[0] > u.shape[1] else u
                    x = x / max(x.norm(), 1e-7)
                    for _ in range(5):
                        a = x @ x.T
                        x = 3.4445 * x + (-4.7750 * a + 2.0315 * a @ a) @ x
                    x = x.T if u.shape[0] > u.shape[1] else x
                    p.mul_(1 - hp["lr"] * d)
                    p.sub_(hp["lr"] * max(1.0, u.shape[0] / u.shape[1]) ** 0.5 * x)
                elif kind == "muon":  # AdamW
                    m, v = state[k]
                    m.mul_(hp["beta1"]).add_((1 - hp["beta1"]) * g)
                    v.mul_(hp["beta2"]).add_((1 - hp["beta2"]) * g * g)
                    p.mul_(1 - hp["lr"] * d)
                    p.sub_(hp["lr"] * (m / (1 - hp["beta1"] ** t)) / ((v / (1 - hp["beta2"] ** t)).sqrt() + hp["eps"]))
                elif kind == "lars":
                    wn, gn = p.norm(), g.norm()
                    ratio = hp["trust_coefficient"] * wn / (gn + d * wn) if adapt and wn > 0 and gn > 0 else 1.0
                    b = state[k][0]
                    b.mul_(hp["momentum"]).add_(hp["lr"] * ratio * (g + d * p))
                    p.sub_(b)
                else:
                    m, v = state[k]
                    m.mul_(hp["beta1"]).add_((1 - hp["beta1"]) * g)
                    v.mul_(hp["beta2"]).add_((1 - hp["beta2"]) * g * g)
                    r = (m / (1 - hp["beta1"] ** t)) / ((v / (1 - hp["beta2"] ** t)).sqrt() + hp["eps"]) + d * p
                    wn, rn = p.norm(), r.norm()
                    ratio = wn / rn if adapt and wn > 0 and rn > 0 else 1.0
                    p.sub_(hp["lr"] * ratio * r)
    return {k: v.detach().numpy().astype(np.float64) for k, v in w.items()}


def main():
    net, work, tool, steps, kind = sys.argv[1:6]
    steps = int(steps)
    hp = {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "trust_coefficient": 0.001, "beta1": 0.9,
          "beta2": 0.999, "eps": 1e-8, "no_decay": "none"}
    for kv in sys.argv[6:]:
        k, v = kv.split("=")
        hp[k] = v if k == "no_decay" else float(v)
    torch.set_num_threads(1)
    ckpt, batch, out = (os.path.join(work, kind + s) for s in (".ckpt", ".batch", ".out"))
    subprocess.run([tool, "init", net, ckpt], check=True)
    w0 = {k: v for k, v in tc.st_read(ckpt).items() if k.split(".")[0] in LAYERS}
    rng = np.random.default_rng(5)
    features = w0["fc1.weight"].shape[1]
    x = rng.standard_normal((48, features, 1, 1)).astype(np.float32)
    y = rng.integers(0, w0["fc3.weight"].shape[0], 48).astype(np.int32)
    tc.st_write(batch, {"x": x, "y": y})
    subprocess.run([tool, "steps", net, ckpt, batch, out, str(steps)], check=True)
    dl = tc.st_read(out)
    t64 = train(w0, x, y, steps, kind, hp, torch.float64)
    t32 = train(w0, x, y, steps, kind, hp, torch.float32)
    names = sorted(w0)
    moved = min(tc.distance(t64[k], np.array(w0[k], dtype=np.float64)) if np.any(w0[k]) else 1.0 for k in names)
    ok, worst = tc.compare(names, dl, t64, t32, kind)
    print("# %s, %d steps: loss %.4f -> %.4f; weights moved by at least %.2g of their largest; worst %.2fx "
          "PyTorch float32's distance to float64 (limit %gx)" % (kind, steps, dl["loss"][0], dl["loss"][-1], moved,
                                                                 worst, tc.FACTOR))
    sys.exit(0 if ok and moved > 1e-3 else 1)


if __name__ == "__main__":
    main()
