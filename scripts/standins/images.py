"""
Test images of the multimodal stand-ins, and the image processors' steps written out with Pillow and
numpy, independent of the server's image code.

The images are drawn here (seeded), in the formats and modes a server meets: a photo-like JPEG, a
portrait PNG, an RGBA PNG whose transparent pixels still carry colour, a grayscale PNG, a JPEG with
EXIF orientation 6, a 7x5 PNG that every processor upscales, and a lossless WebP. JPEGs are saved
without chroma subsampling, so that decoders agree on their pixels.

Preprocessing is transformers' (or the torchvision transforms a remote-code processor composes):
`Image.open`, `ImageOps.exif_transpose` (transformers' load_image), `convert("RGB")` (alpha dropped,
not composited), resize with Pillow at the config's resample, centre crop, rescale, normalise,
channels first.
"""
import hashlib
import io
import os

import numpy as np
from PIL import Image, ImageDraw, ImageOps

# Every multimodal stand-in folder has these under golden-images/ (made by write_images).
IMAGES = [
    "photo-640x480.jpg",
    "portrait-300x500.png",
    "rgba-256x256.png",
    "gray-200x150.png",
    "exif-orientation-6.jpg",
    "tiny-7x5.png",
    "lossless-320x200.webp",
]
FOLDER = "golden-images"


def _photo(width, height, seed):
    """Smooth gradients, a few shapes and some noise: something like a photograph."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 128 + 100 * np.sin(x / width * 3.1 + seed) * np.cos(y / height * 2.3)
    g = 128 + 90 * np.cos(x / width * 5.0 - y / height * 1.7)
    b = 96 + 80 * np.sin((x + y) / (width + height) * 6.0 + seed * 0.5)
    img = np.stack([r, g, b], -1) + rng.normal(0, 6, (height, width, 3))
    image = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(6 if min(width, height) >= 32 else 0):
        x0, y0 = int(rng.integers(0, width - 8)), int(rng.integers(0, height - 8))
        x1, y1 = x0 + int(rng.integers(8, width // 3)), y0 + int(rng.integers(8, height // 3))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=colour)
    return image


def _exif_orientation(value):
    exif = Image.Exif()
    exif[0x0112] = value  # Orientation
    return exif


def write_images(folder):
    """Writes the test images into `folder`/golden-images; returns {file: bytes written}."""
    out = os.path.join(folder, FOLDER)
    os.makedirs(out, exist_ok=True)
    rgba = _photo(256, 256, 3).convert("RGBA")
    alpha = np.zeros((256, 256), np.uint8)
    alpha[32:224, 32:224] = 255
    alpha[96:160, :] = 128
    rgba.putalpha(Image.fromarray(alpha, "L"))
    made = {
        "photo-640x480.jpg": (_photo(640, 480, 1), {"quality": 92, "subsampling": 0}),
        "portrait-300x500.png": (_photo(300, 500, 2), {}),
        "rgba-256x256.png": (rgba, {}),
        "gray-200x150.png": (_photo(200, 150, 4).convert("L"), {}),
        # Stored 320 wide and 240 high; shown (and processed) 240 wide and 320 high.
        "exif-orientation-6.jpg": (_photo(320, 240, 5), {"quality": 92, "subsampling": 0, "exif": _exif_orientation(6)}),
        "tiny-7x5.png": (_photo(7, 5, 6), {}),
        "lossless-320x200.webp": (_photo(320, 200, 7), {"lossless": True}),
    }
    assert list(made) == IMAGES
    sizes = {}
    for name, (image, options) in made.items():
        buf = io.BytesIO()
        image.save(buf, format={"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}[name.rsplit(".", 1)[1]], **options)
        with open(os.path.join(out, name), "wb") as f:
            f.write(buf.getvalue())
        sizes[f"{FOLDER}/{name}"] = len(buf.getvalue())
    return sizes


def load(path):
    """The image as transformers' load_image gives it: EXIF orientation applied, mode kept."""
    with Image.open(path) as image:
        image.load()
        return ImageOps.exif_transpose(image)


# ---------------------------------------------------------------------------------------------
# Processors
# ---------------------------------------------------------------------------------------------
def shortest_edge_size(width, height, shortest_edge):
    """(width, height) with the short side at `shortest_edge`, the long one scaled and truncated
    (transformers' get_resize_output_image_size with default_to_square=False; torchvision's
    Resize(int) computes the same)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_short, new_long) if width <= height else (new_long, new_short)


def crop_box(width, height, crop_height, crop_width, rounding):
    """Centre crop offsets as transformers computes them (`floor`: (h - ch) // 2) or torchvision
    (`round`: int(round((h - ch) / 2)), Python's rounding half to even); (left, top, right, bottom)."""
    assert height >= crop_height and width >= crop_width, "images are resized past the crop first"
    if rounding == "floor":
        top, left = (height - crop_height) // 2, (width - crop_width) // 2
    else:
        top, left = int(round((height - crop_height) / 2.0)), int(round((width - crop_width) / 2.0))
    return left, top, left + crop_width, top + crop_height


def pixel_values(path, config):
    """float32 [3, H, W] of the image at `path` as the processor described by `config` makes it.

    `config`: {"resize": ("shortest_edge", n) | ("fixed", height, width), "resample": PIL code,
    "crop": (height, width) or None, "crop_rounding": "floor" | "round", "rescale": factor, "mean": [3],
    "std": [3]}. The image is converted to RGB first (alpha dropped), as load_image and jina-clip's
    encode_image do before any processor sees it."""
    image = load(path).convert("RGB")
    kind = config["resize"][0]
    if kind == "shortest_edge":
        size = shortest_edge_size(image.width, image.height, config["resize"][1])
    else:
        size = (config["resize"][2], config["resize"][1])
    image = image.resize(size, resample=config["resample"], reducing_gap=None)
    if config["crop"]:
        image = image.crop(crop_box(image.width, image.height, *config["crop"], config["crop_rounding"]))
    x = np.asarray(image).astype(np.float64) * config["rescale"]
    x = (x - np.asarray(config["mean"], np.float64)) / np.asarray(config["std"], np.float64)
    return np.ascontiguousarray(x.transpose(2, 0, 1)).astype(np.float32)


def sha256_of(values):
    """sha256 of float32 little-endian bytes, the server's pixel_values compared without a file."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f4").tobytes()).hexdigest()
