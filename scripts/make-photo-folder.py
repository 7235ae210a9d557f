#!/usr/bin/env python3
"""Makes an image folder of real photographs for `feedmesh-bench vision`.

torchvision's ImageFolder layout, OUT/<class>/<image>.jpg: one class per
photograph that Debian ships in python3-sklearn (scikit-learn's sample
images, china.jpg and flower.jpg, 640x427, CC BY 2.0: see that package's
sklearn/datasets/images/README.txt), each image a window of it cut at a
random scale (35-100 % of the largest 4:3 window) and position, a quarter
of them upright (3:4), resized to 500x375 (or 375x500) with Lanczos and
saved as a baseline JPEG at quality 90 with 4:2:0 chroma, as typical
ImageNet-like photographs are. Deterministic for a given --seed. Nothing
is downloaded.

    /usr/bin/python3 scripts/make-photo-folder.py OUT [--per-class 500] [--seed 1]

Needs python3-pil and python3-sklearn (only its image files are read).
"""

import argparse
import importlib.util
import os
import random
import sys

from PIL import Image


def sample_photos():
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make-photo-folder: no scikit-learn sample photographs (install python3-sklearn)")
    d = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "images")
    photos = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".jpg"))
    if not photos:
        sys.exit(f"make-photo-folder: no .jpg in {d}")
    return photos


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--per-class", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quality", type=int, default=90)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    for path in sample_photos():
        src = Image.open(path).convert("RGB")
        name = os.path.splitext(os.path.basename(path))[0]
        cls = os.path.join(a.out, name)
        os.makedirs(cls, exist_ok=True)
        W, H = src.size
        for i in range(a.per_class):
            upright = rng.random() < 0.25
            out = (375, 500) if upright else (500, 375)
            ar = out[0] / out[1]
            # the largest window of that aspect ratio, scaled
            ww, wh = (W, W / ar) if W / H < ar else (H * ar, H)
            s = rng.uniform(0.35, 1.0)
            ww, wh = ww * s, wh * s
            x, y = rng.uniform(0, W - ww), rng.uniform(0, H - wh)
            im = src.resize(out, Image.LANCZOS, box=(x, y, x + ww, y + wh))
            if rng.random() < 0.5:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            im.save(os.path.join(cls, f"{name}-{i:05d}.jpg"), quality=a.quality, subsampling="4:2:0")
    print(a.out)


if __name__ == "__main__":
    main()
