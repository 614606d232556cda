"""Pillow's side of bench/image-preprocess.ts.

  python3 bench/pillow-preprocess.py make DIR      writes the bench images: 224x224 PNGs and
                                                   1920x1080 photo-like JPEGs (gradients, shapes,
                                                   noise; quality 90)
  python3 bench/pillow-preprocess.py serve SPEC    times transformers' slow image processor path on
                                                   files, a round per line read (SPEC: JSON with files
                                                   and processors)

The timed path per image, from its bytes in memory: load_image (Image.open, exif_transpose,
convert('RGB')), Pillow's resize, center crop, rescale and normalise with numpy as transformers
does them, channel-first float32. CPU time is time.process_time.
"""

import io
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageOps


def photo(width, height, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 128 + 100 * np.sin(x / (width / 3.1) + seed) * np.cos(y / (height / 2.3))
    g = 255 * (x + y) / (width + height)
    b = 128 + 90 * np.cos(np.hypot(x - width * 0.6, y - height * 0.4) / (min(width, height) / 7 + 1))
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 9, (height, width, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def make(directory, pngs=40, jpegs=12):
    os.makedirs(directory, exist_ok=True)
    for i in range(pngs):
        Image.fromarray(photo(224, 224, i)).save(os.path.join(directory, f"small-{i:02d}.png"))
    for i in range(jpegs):
        Image.fromarray(photo(1920, 1080, 100 + i)).save(os.path.join(directory, f"photo-{i:02d}.jpg"), quality=90)


def pixel_values(data, p):
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    width, height = image.size
    if "shortest_edge" in p:
        size = p["shortest_edge"]
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = size, int(size * long / short)
        new_height, new_width = (new_long, new_short) if width <= height else (new_short, new_long)
    else:
        new_height, new_width = p["height"], p["width"]
    array = np.array(image.resize((new_width, new_height), resample=p["resample"]))
    if "crop" in p:
        crop_height, crop_width = p["crop"]
        top = (array.shape[0] - crop_height) // 2
        left = (array.shape[1] - crop_width) // 2
        array = array[top:top + crop_height, left:left + crop_width]
    array = (array.astype(np.float64) * p["rescale"]).astype(np.float32)
    array = (array - np.array(p["mean"], dtype=np.float32)) / np.array(p["std"], dtype=np.float32)
    return array.transpose(2, 0, 1)


def serve(spec):
    """Times rounds on request, so that the bench can alternate them with its own: each line on stdin
    names a processor; the answer is one line, the CPU ms per image of one pass over the files.
    Every processor is warmed up on every file first (a fresh process's first passes run slower)."""
    files = [open(f, "rb").read() for f in spec["files"]]
    processors = spec["processors"]
    for p in processors.values():
        for data in files:
            pixel_values(data, p)
    print(json.dumps({"pillow": Image.__version__, "numpy": np.__version__}), flush=True)
    for line in sys.stdin:
        p = processors[line.strip()]
        start = time.process_time()
        for data in files:
            pixel_values(data, p)
        print((time.process_time() - start) * 1000 / len(files), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        serve(json.loads(sys.argv[2]))
