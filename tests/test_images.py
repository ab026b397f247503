#!/usr/bin/python3
"""test_images.py: the image input side against PIL and torchvision on a
generated image set (tests/make_image_set.py: every JPEG and PNG mode, odd
sizes, unreadable files), through tests/image_tool:
- decoded pixels equal PIL's (same libjpeg-turbo: within 1 level), grey,
  RGB, CMYK, palette, alpha, interlaced, progressive; to 1 channel as PIL's L;
- DCT-scaled decoding (M/8) equals PIL's draft() at the same scale;
- the random-resized-crop and centre-crop geometry: a box cut out and
  resized equals torchvision's resized_crop (+ hflip), the evaluation box
  equals Resize(8/7 side) + CenterCrop; boxes stay inside the image, their
  area and ratio stay in range, the fallback is torchvision's;
- decoding at a DCT scale stays close to full decoding (same box);
- batches are identical for 1, 2 and 3 decode threads and for 1, 2 and 3
  ranks (the ranks' slices concatenated), and differ between epochs;
- unreadable files are skipped with a warning naming each, or stop the
  run with --bad-samples fail.
Prints TAP."""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

TOP = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("top_builddir", os.path.join(TOP, "build"))
TOOL = os.path.join(BUILD, "tests", "image_tool")
results = []


def check(ok, what):
    results.append((bool(ok), what))
    print("%s %d - %s" % ("ok" if ok else "not ok", len(results), what), flush=True)


def tool(*args, env=None):
    p = subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr.decode()


def decode(path, m, c):
    rc, out, err = tool("decode", path, m, c)
    assert rc == 0, err
    nl = out.index(b"\n")
    w, h, cc = (int(v) for v in out[:nl].split())
    px = np.frombuffer(out[nl + 1:], np.uint8).reshape(h, w, cc)
    return px


def transform(path, c, ow, oh, box, flip, clip, dct):
    rc, out, err = tool("box", path, c, ow, oh, box[0], box[1], box[2], box[3], flip | (clip << 1), dct)
    assert rc == 0, err
    return np.frombuffer(out, np.float32).reshape(c, oh, ow)


def pil_rgb(path, c):
    im = Image.open(path)
    return np.asarray(im.convert("RGB" if c == 3 else "L")).reshape(im.size[1], im.size[0], c)


def main():
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F

    tmp = tempfile.mkdtemp(prefix="dltrain-images-")
    root = os.path.join(tmp, "set")
    subprocess.run([sys.executable, os.path.join(TOP, "tests", "make_image_set.py"), root, "--per-class", "6",
                    "--classes", "10", "--bad"], check=True, capture_output=True)
    # A few photo-sized files besides (odd sizes, every JPEG kind).
    big = os.path.join(tmp, "big")
    os.makedirs(big)
    rng = np.random.default_rng(3)
    base = Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).resize((504, 376), Image.BICUBIC)
    base.save(os.path.join(big, "a420.jpg"), quality=85)
    base.save(os.path.join(big, "b444.jpg"), quality=92, subsampling=0)
    base.save(os.path.join(big, "c-progressive.jpg"), quality=80, progressive=True)
    base.convert("L").save(os.path.join(big, "d-grey.jpg"), quality=90)
    base.convert("CMYK").save(os.path.join(big, "e-cmyk.jpg"), quality=90)
    base.save(os.path.join(big, "f.png"))
    bigs = sorted(os.path.join(big, f) for f in os.listdir(big))
    files = []
    for split in ("train", "val"):
        for d, _, names in sorted(os.walk(os.path.join(root, split))):
            files += [os.path.join(d, n) for n in sorted(names) if not n.startswith("bad-")]
    files += bigs

    # 1. Full-size decoding equals PIL.
    worst = {1: 0, 3: 0}
    for f in files:
        for c in (3, 1):
            a, b = decode(f, 8, c).astype(int), pil_rgb(f, c).astype(int)
            if a.shape != b.shape:
                worst[c] = 999
                print("# %s: shape %s vs PIL %s" % (f, a.shape, b.shape))
                continue
            worst[c] = max(worst[c], int(np.abs(a - b).max()))
    check(worst[3] <= 1, "%d files decode to PIL's RGB within 1 level (largest difference %d)" % (len(files), worst[3]))
    check(worst[1] <= 1, "and to PIL's L within 1 level (largest difference %d)" % worst[1])

    # 2. DCT scaling: M/8 equals PIL's draft at scales 1/2, 1/4, 1/8.
    worst, cases = 0, 0
    for f in bigs[:5]:
        for m in (4, 2, 1):
            im = Image.open(f)
            W, H = im.size
            want = (-(-W * m // 8), -(-H * m // 8))
            im.draft(im.mode, want)
            if im.size != want:
                continue
            a = decode(f, m, 3).astype(int)
            b = np.asarray(im.convert("RGB")).astype(int)
            cases += 1
            worst = max(worst, int(np.abs(a - b).max()) if a.shape == b.shape else 999)
    check(cases >= 8 and worst <= 1, "%d DCT-scaled decodes equal PIL's draft within 1 level (largest %d)" % (cases, worst))

    # 3. Crop + resize (+ flip) equals torchvision's resized_crop on random boxes.
    worst, mean_err, n = 0.0, 0.0, 0
    r = np.random.default_rng(5)
    for f in files[::3] + bigs:
        im = Image.open(f).convert("RGB")
        W, H = im.size
        for _ in range(3):
            w, h = int(r.integers(1, W + 1)), int(r.integers(1, H + 1))
            x, y = int(r.integers(0, W - w + 1)), int(r.integers(0, H - h + 1))
            ow, oh = int(r.integers(8, 70)), int(r.integers(8, 70))
            flip = int(r.integers(0, 2))
            a = transform(f, 3, ow, oh, (x, y, w, h), flip, 1, 0)
            ref = F.resized_crop(im, y, x, h, w, [oh, ow], interpolation=T.InterpolationMode.BILINEAR)
            if flip:
                ref = F.hflip(ref)
            b = F.to_tensor(ref).numpy()
            if float(np.abs(a - b).max()) > worst:
                worst = float(np.abs(a - b).max())
                print("# largest so far: %s box %s to %dx%d" % (f, (x, y, w, h), ow, oh))
            mean_err += float(np.abs(a - b).mean())
            n += 1
    check(worst <= 1.01 / 255, "%d random crops match torchvision's resized_crop + hflip within 1 level (largest %.2f levels)"
          % (n, worst * 255))
    check(mean_err / n < 0.3 / 255, "mean difference %.3f levels" % (mean_err / n * 255))

    # 4. Evaluation geometry: our centre box equals Resize(round(8/7 S)) + CenterCrop(S).
    worst, n = 0.0, 0
    for f in files[::4] + bigs:
        im = Image.open(f).convert("RGB")
        W, H = im.size
        for S in (24, 32, 56):
            rc, out, err = tool("boxes", W, H, S, S, "eval", 1, 1)
            x, y, w, h, fl = (float(v) for v in out.split())
            a = transform(f, 3, S, S, (x, y, w, h), 0, 0, 0)
            ref = T.Compose([T.Resize(round(S * 8 / 7)), T.CenterCrop(S)])(im)
            b = F.to_tensor(ref).numpy()
            worst = max(worst, float(np.abs(a - b).max()))
            n += 1
    check(worst <= 1.01 / 255, "%d evaluation crops match Resize + CenterCrop within 1 level (largest %.2f levels)"
          % (n, worst * 255))

    # 5. Random-resized boxes: inside, in range; fallback as torchvision's.
    W, H, N = 500, 375, 4000
    rc, out, err = tool("boxes", W, H, 224, 224, "train", 11, N)
    boxes = np.array([[float(v) for v in line.split()] for line in out.decode().splitlines()])
    x, y, w, h, fl = boxes.T
    inside = np.all((x >= 0) & (y >= 0) & (x + w <= W) & (y + h <= H) & (w >= 1) & (h >= 1))
    area = w * h / (W * H)
    ratio = w / h
    check(inside and np.all(boxes[:, :4] == np.round(boxes[:, :4])), "%d training boxes are integral and inside the image" % N)
    tol = 1.0 / 120
    check(np.all((area >= 0.08 - 0.01) & (area <= 1 + 1e-9)) and np.all((ratio >= 0.75 * (1 - tol)) & (ratio <= 4 / 3 * (1 + tol))),
          "their areas are in [0.08, 1] and ratios in [3/4, 4/3] (up to rounding)")
    flips = (fl.astype(int) & 1).mean()
    check(abs(flips - 0.5) < 4 * math.sqrt(0.25 / N), "half of them are flipped (%.3f)" % flips)
    torch.manual_seed(0)
    tv = np.array([T.RandomResizedCrop.get_params(Image.new("L", (W, H)), [0.08, 1.0], [3 / 4, 4 / 3])
                   for _ in range(N)], dtype=float)
    tv_area = tv[:, 2] * tv[:, 3] / (W * H)
    se = math.sqrt(area.var() / N + tv_area.var() / N)
    check(abs(area.mean() - tv_area.mean()) < 4 * se,
          "mean area fraction %.4f vs torchvision's %.4f (4 standard errors: %.4f)" % (area.mean(), tv_area.mean(), 4 * se))
    rc, out, err = tool("boxes", 1000, 100, 32, 32, "train:0.9", 1, 1)
    fb = tuple(float(v) for v in out.split()[:4])
    tvb = T.RandomResizedCrop.get_params(Image.new("L", (1000, 100)), [0.9, 1.0], [3 / 4, 4 / 3])
    check(fb == (tvb[1], tvb[0], tvb[3], tvb[2]),
          "a 10:1 image falls back to torchvision's centre crop (x y w h %s; torchvision %s)" % (fb, tvb))

    # 6. DCT-scaled decoding stays near full decoding for the same box.
    worst, mean_err, n = 0.0, 0.0, 0
    for f in bigs[:5]:
        for box in ((0, 0, 504, 376), (100, 50, 300, 250), (37, 11, 140, 96)):
            a = transform(f, 3, 64, 48, box, 0, 1, 1)
            b = transform(f, 3, 64, 48, box, 0, 1, 0)
            worst = max(worst, float(np.abs(a - b).max()))
            mean_err += float(np.abs(a - b).mean())
            n += 1
    check(mean_err / n < 1.0 / 255 and worst < 12 / 255,
          "%d DCT-scaled transforms are within %.2f levels on average (largest %.1f) of full decoding" %
          (n, mean_err / n * 255, worst * 255))

    # 7. Determinism across decode threads and ranks; epochs differ.
    def batches(threads, ranks, epoch, env=None):
        rc, out, err = tool("batches", root, 3, 32, 8, threads, ranks, epoch, env=env)
        assert rc == 0, err
        return out, err
    ref, err1 = batches(1, 1, 0)
    same_threads = all(batches(t, 1, 0)[0] == ref for t in (2, 3))
    check(len(ref) > 0 and same_threads, "1, 2 and 3 decode threads give the same batches (%d bytes)" % len(ref))
    same_ranks = all(batches(2, k, 0)[0] == ref for k in (2, 3))
    check(same_ranks, "2 and 3 ranks' slices concatenated give the serial batches")
    check(batches(2, 1, 1)[0] != ref, "the next epoch's batches differ (new order and augmentation)")

    # 8. Unreadable files.
    bad = ["bad-empty.png", "bad-text.jpg", "bad-truncated.jpg", "bad-truncated.png"]
    check(all(err1.count(b) == 1 for b in bad) and "4 unreadable samples skipped" in err1,
          "each unreadable file is named once in a warning, and counted at the end")
    env = dict(os.environ, IMAGE_TOOL_BAD="fail")
    rc, out, err = tool("batches", root, 3, 32, 8, 2, 1, 0, env=env)
    check(rc != 0 and "bad-" in err and "--bad-samples fail" in err, "--bad-samples fail stops, naming the file")

    print("1..%d" % len(results))
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("1..0 # SKIP python3-torchvision or python3-pil missing (tools/deps installs them)")
        sys.exit(0)
    main()
