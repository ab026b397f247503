#!/usr/bin/python3
"""make_image_set.py: writes an image folder (DIR/train and DIR/val, one
subfolder per class) made from Fashion-MNIST, so that a network can learn it,
for the image tests and the data benchmark.  No download: the digits come
from Debian's dataset-fashion-mnist package.

  make_image_set.py DIR [--per-class N] [--val-per-class N] [--classes K]
                        [--size WxH] [--jpeg-only] [--texture] [--bad] [--seed S]

Without --size every image gets its own size (24..96 pixels a side, rarely
square) and the files cycle through the modes a real folder holds: grey,
RGB and CMYK JPEG (baseline 4:2:0, 4:4:4, progressive), grey, RGB, palette,
grey+alpha and RGBA PNG (some interlaced).  --bad adds unreadable files to
the training split: a truncated JPEG, a truncated PNG, an empty file and a
text file named .jpg (their names start with 'bad-').  --texture adds
photo-like detail, so that JPEGs weigh what photos do (for benchmarks)."""
import argparse
import gzip
import io
import os

import numpy as np
from PIL import Image

FASHION = "/usr/share/datasets/fashion-mnist"
NAMES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]
MODES = ["jpeg-L", "jpeg-RGB", "png-RGB", "png-L", "jpeg-RGB-444", "png-P", "jpeg-CMYK", "png-LA",
         "jpeg-RGB-progressive", "png-RGBA-interlaced"]


def read_idx(name):
    with gzip.open(os.path.join(FASHION, name), "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def colourise(grey, rng):
    """An RGB picture of a grey one: the garment in a random colour on a
    random background, so that colour carries no label."""
    g = grey.astype(np.float32) / 255.0
    fg = rng.uniform(0.3, 1.0, 3)
    bg = rng.uniform(0.0, 0.3, 3)
    rgb = g[..., None] * fg + (1 - g[..., None]) * bg
    return Image.fromarray((rgb * 255 + 0.5).astype(np.uint8), "RGB")


def add_texture(img, rng):
    """Fine detail (noise at two scales), so that a JPEG weighs what a photo
    of its size does (about 0.5 bytes per pixel at quality 90) instead of a
    smooth drawing's few kilobytes: entropy decoding then costs what it
    costs on real photos."""
    a = np.asarray(img).astype(np.float32)
    h, w = a.shape[:2]
    coarse = rng.normal(0, 18, (h // 4 + 1, w // 4 + 1, 3)).repeat(4, 0).repeat(4, 1)[:h, :w]
    fine = rng.normal(0, 10, (h, w, 3))
    return Image.fromarray(np.clip(a + coarse + fine, 0, 255).astype(np.uint8), "RGB")


def encode(img, mode):
    """img (RGB) saved in mode; returns (bytes, extension)."""
    kind, pil_mode = mode.split("-")[0], mode.split("-")[1]
    out = io.BytesIO()
    im = img.convert(pil_mode) if pil_mode not in ("P", "LA", "RGBA") else img
    if pil_mode == "P":
        im = img.convert("P", palette=Image.ADAPTIVE, colors=64)
    elif pil_mode in ("LA", "RGBA"):
        im = img.convert(pil_mode[:-1])
        im.putalpha(Image.linear_gradient("L").resize(im.size))
    if kind == "jpeg":
        opts = {"quality": 90}
        if mode.endswith("444"):
            opts["subsampling"] = 0
        if mode.endswith("progressive"):
            opts["progressive"] = True
        im.save(out, "JPEG", **opts)
        return out.getvalue(), ".jpg"
    im.save(out, "PNG", interlace=mode.endswith("interlaced"))
    return out.getvalue(), ".png"


def write_split(root, split, images, labels, per_class, classes, args, rng, start):
    made = 0
    for c in range(classes):
        folder = os.path.join(root, split, "%02d-%s" % (c, NAMES[c]))
        os.makedirs(folder, exist_ok=True)
        idx = np.nonzero(labels == c)[0][start:start + per_class]
        for k, i in enumerate(idx):
            if args.size:
                w, h = args.size
            else:
                w, h = int(rng.integers(24, 97)), int(rng.integers(24, 97))
            img = colourise(images[i], rng).resize((w, h), Image.BILINEAR)
            if args.texture:
                img = add_texture(img, rng)
            mode = "jpeg-RGB" if args.jpeg_only else MODES[(k + c) % len(MODES)]
            data, ext = encode(img, mode)
            with open(os.path.join(folder, "%05d%s" % (k, ext)), "wb") as f:
                f.write(data)
            made += 1
    return made


def write_bad(root):
    folder = os.path.join(root, "train", "00-" + NAMES[0])
    img = Image.new("RGB", (40, 30), (200, 10, 10))
    jpg, png = io.BytesIO(), io.BytesIO()
    img.save(jpg, "JPEG")
    img.save(png, "PNG")
    files = {"bad-truncated.jpg": jpg.getvalue()[:len(jpg.getvalue()) // 2],
             "bad-truncated.png": png.getvalue()[:len(png.getvalue()) // 2],
             "bad-empty.png": b"",
             "bad-text.jpg": b"this is not an image\n"}
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return sorted(files)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--per-class", type=int, default=20)
    p.add_argument("--val-per-class", type=int, default=None)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=lambda s: tuple(int(v) for v in s.split("x")), default=None)
    p.add_argument("--jpeg-only", action="store_true")
    p.add_argument("--texture", action="store_true", help="photo-like detail (benchmarks)")
    p.add_argument("--bad", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    images, labels = read_idx("train-images-idx3-ubyte.gz"), read_idx("train-labels-idx1-ubyte.gz")
    val = args.per_class // 4 if args.val_per_class is None else args.val_per_class
    n = write_split(args.dir, "train", images, labels, args.per_class, args.classes, args, rng, 0)
    n += write_split(args.dir, "val", images, labels, max(val, 1), args.classes, args, rng, args.per_class)
    bad = write_bad(args.dir) if args.bad else []
    print("%s: %d images, %d unreadable files" % (args.dir, n, len(bad)))


if __name__ == "__main__":
    main()
