# regression_torch.py: the Python side of tests/test_regression.sh.
#   data DIR              writes the test's datasets into DIR: a regression
#                         set (.npy and CSV), a small image set as IDX files,
#                         and malformed .npy and CSV files
#   compare LOSS DIR      PyTorch's run of DIR/LOSS.yaml's steps from dltrain's
#                         initial weights (DIR/LOSS-init.bin): the per-step
#                         losses (DIR/LOSS.jsonl) and the final weights
#                         (DIR/LOSS-final.bin) within 4x float32's distance
#                         to float64 (plus 1e-6)
#   top5 DIR NAME C       the top-1 and top-5 counts of DIR/NAME-final.bin's
#                         linear classifier over the IDX test images, against
#                         the final evaluation in DIR/NAME.jsonl
# Prints '# ' lines, exits 0 when the numbers agree.
import json
import struct
import sys

import numpy as np

F, W, N_TRAIN, N_TEST, HIDDEN, STEPS, LR, MOMENTUM = 10, 3, 256, 64, 16, 15, 0.05, 0.9


def friedman(rng, n):
    """Friedman's first regression problem (J. Friedman, "Multivariate
    adaptive regression splines", Ann. Statist. 19, 1991): ten uniform
    features, five of them used, scaled to unit size, and two more targets
    from the other five, each with Gaussian noise."""
    x = rng.uniform(0, 1, (n, F))
    y0 = (10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]) / 10
    y1 = np.sin(2 * np.pi * x[:, 5]) * x[:, 6]
    y2 = x[:, 7] - x[:, 8] * x[:, 9]
    y = np.stack([y0, y1, y2], 1) + 0.05 * rng.standard_normal((n, W))
    return x.astype(np.float32), y.astype(np.float32)


def idx(path, magic, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data))


def npy_raw(path, descr, shape, payload, fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)


def data(d):
    rng = np.random.default_rng(47)
    xtr, ytr = friedman(rng, N_TRAIN)
    xte, yte = friedman(rng, N_TEST)
    np.save(d + "/xtr.npy", xtr)
    np.save(d + "/ytr.npy", ytr)
    np.save(d + "/xte.npy", xte.astype(np.float64))  # float64: rounded to float32 on reading
    np.save(d + "/yte.npy", yte[:, :])
    for name, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        with open("%s/%s.csv" % (d, name), "w") as f:
            f.write(",".join(["x%d" % i for i in range(F)] + ["y%d" % k for k in range(W)]) + "\n")
            for row in np.hstack([x, y]):
                f.write(",".join(repr(float(v)) for v in row) + "\n")
    # an image set for top-5: 4x4 images, 10 and 5 classes
    img = rng.integers(0, 256, (200, 4, 4), dtype=np.uint8)
    idx(d + "/img.idx", 0x803, (200, 4, 4), img.tobytes())
    idx(d + "/lab10.idx", 0x801, (200,), rng.integers(0, 10, 200, dtype=np.uint8).tobytes())
    idx(d + "/lab5.idx", 0x801, (200,), rng.integers(0, 5, 200, dtype=np.uint8).tobytes())
    # malformed files
    npy_raw(d + "/int.npy", "<i4", (N_TRAIN, F), np.zeros((N_TRAIN, F), "<i4").tobytes())
    npy_raw(d + "/big.npy", ">f4", (N_TRAIN, F), xtr.astype(">f4").tobytes())
    npy_raw(d + "/fortran.npy", "<f4", (N_TRAIN, F), np.asfortranarray(xtr).tobytes("F"), fortran=True)
    raw = open(d + "/xtr.npy", "rb").read()
    open(d + "/short.npy", "wb").write(raw[:-10])
    np.save(d + "/narrow.npy", xtr[:, :F - 1])
    np.save(d + "/fewer.npy", ytr[:100])
    lines = open(d + "/train.csv").read().split("\n")
    lines[4] = ",".join(lines[4].split(",")[:-1])  # line 5: a value short
    open(d + "/width.csv", "w").write("\n".join(lines))
    lines = open(d + "/train.csv").read().split("\n")
    fields = lines[2].split(",")
    fields[1] = "abc"
    lines[2] = ",".join(fields)  # line 3, field 2: not a number
    open(d + "/word.csv", "w").write("\n".join(lines))
    open(d + "/first.csv", "w").write("\n".join(lines[2:]))  # no header: its first row has the bad field
    return 0


def floats(path):
    return np.frombuffer(open(path, "rb").read(), "<f4").astype(np.float64)


def params(flat):
    shapes = [(HIDDEN, F), (HIDDEN,), (W, HIDDEN), (W,)]
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(flat[at:at + n].reshape(s))
        at += n
    assert at == flat.size, "%d weights, expected %d" % (flat.size, at)
    return out


def torch_run(loss_name, init, x, y, dtype):
    import torch
    ws = [torch.tensor(p, dtype=dtype, requires_grad=True) for p in params(init)]
    xt, yt = torch.tensor(x, dtype=dtype), torch.tensor(y, dtype=dtype)
    crit = torch.nn.MSELoss() if loss_name == "mse" else torch.nn.L1Loss()
    opt = torch.optim.SGD(ws, lr=LR, momentum=MOMENTUM)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        h = torch.tanh(xt @ ws[0].T + ws[1])
        loss = crit(h @ ws[2].T + ws[3], yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), np.concatenate([w.detach().double().numpy().ravel() for w in ws])


def within(what, ours, t32, t64):
    err, ref = np.abs(ours - t64).max(), np.abs(t32 - t64).max()
    ok = err <= 4 * ref + 1e-6
    print("# %s: |dltrain - float64| %.3g, |float32 - float64| %.3g%s" % (what, err, ref, "" if ok else "  TOO FAR"))
    return ok


def compare(loss_name, d):
    import torch
    torch.set_num_threads(1)
    x, y = np.load(d + "/xtr.npy"), np.load(d + "/ytr.npy")
    init = floats("%s/%s-init.bin" % (d, loss_name))
    steps = [json.loads(l) for l in open("%s/%s.jsonl" % (d, loss_name)) if '"event":"step"' in l]
    ours_loss = np.array([s["loss"] for s in steps])
    ours_w = floats("%s/%s-final.bin" % (d, loss_name))
    if len(ours_loss) != STEPS:
        print("# %d steps in the metrics, expected %d" % (len(ours_loss), STEPS))
        return 1
    l32, w32 = torch_run(loss_name, init, x, y, torch.float32)
    l64, w64 = torch_run(loss_name, init, x, y, torch.float64)
    print("# %s: loss %.6f -> %.6f (PyTorch float64 %.6f -> %.6f)" % (loss_name, ours_loss[0], ours_loss[-1], l64[0],
                                                                     l64[-1]))
    ok = within(loss_name + " losses", ours_loss, l32, l64) and within(loss_name + " weights", ours_w, w32, w64)
    ok = ok and l64[-1] < 0.8 * l64[0]  # the steps learn something
    return 0 if ok else 1


def top5(d, name, classes):
    flat = floats("%s/%s-final.bin" % (d, name))
    w, b = flat[:classes * 16].reshape(classes, 16), flat[classes * 16:]
    raw = open(d + "/img.idx", "rb").read()[16:]
    x = np.frombuffer(raw, np.uint8).reshape(200, 16).astype(np.float64) / 255
    labels = np.frombuffer(open("%s/lab%d.idx" % (d, classes), "rb").read()[8:], np.uint8)
    logits = x @ w.T + b
    own = logits[np.arange(200), labels]
    above = (logits > own[:, None]).sum(1)
    top1, top5_count = int((above == 0).sum()), int((above < 5).sum())
    epochs = [json.loads(l) for l in open("%s/%s.jsonl" % (d, name)) if '"event":"epoch"' in l]
    last = epochs[-1]
    got1 = round(last["test_accuracy"] * 200)
    got5 = round(last["test_top5_accuracy"] * 200) if "test_top5_accuracy" in last else None
    print("# %s: top-1 %d of 200, top-5 %d (counted here); dltrain top-1 %s, top-5 %s" % (name, top1, top5_count,
                                                                                        got1, got5))
    return 0 if got1 == top1 and got5 == top5_count else 1


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "data":
        sys.exit(data(sys.argv[2]))
    if cmd == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if cmd == "top5":
        sys.exit(top5(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit("unknown command " + cmd)
