#!/usr/bin/env python3
"""
Exact-interface stand-ins of Hub embedding, rerank, classification and text-and-image models: for
each repository, its Hugging Face folder (real configs and tokenizer, the real ONNX export's input /
output names and dtypes) with seeded random weights, and golden.json from an independent float64
numpy forward pass (with test images and their pixel values for the text-and-image ones).

  python3 make_standins.py --out DIR [--size tiny|real] [--only owner/name,...] [--shared ../shared]

writes DIR/<owner>/<name>/. A folder whose stamp (hash of these scripts and the size) is current
is kept as it is. `--size tiny` (tests) shrinks layers, widths and windows; `--size real` (bench)
has the real model's sizes.
"""
import argparse
import glob
import hashlib
import importlib
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import golden  # noqa: E402 (after the path is set)


def families():
    """{family name: module} of families/*.py."""
    mods = {}
    for path in sorted(glob.glob(os.path.join(HERE, "families", "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if not name.startswith("_"):
            mods[name] = importlib.import_module(f"families.{name}")
    return mods


def stamp(size):
    h = hashlib.sha256(size.encode())
    for path in sorted(glob.glob(os.path.join(HERE, "**", "*.py"), recursive=True)):
        h.update(os.path.relpath(path, HERE).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", choices=("tiny", "real"), default="tiny")
    ap.add_argument("--only", default="", help="comma-separated repo ids (default: all)")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..", "shared"),
                    help="the project's shared resources (real tokenizer files under models/hub-files)")
    ap.add_argument("--list", action="store_true", help="print the stand-ins and exit")
    ap.add_argument("--no-golden", action="store_true",
                    help="models only, no golden.json (bench: the reference forward pass of a real-size model takes minutes)")
    args = ap.parse_args()

    standins = [(fam, mod, s) for fam, mod in families().items() for s in mod.STANDINS]
    if args.list:
        for fam, _, s in standins:
            print(f"{s['repo']}\t{fam}\t{s['task']}")
        return
    only = {r.strip() for r in args.only.split(",") if r.strip()}
    unknown = only - {s["repo"] for _, _, s in standins}
    if unknown:
        sys.exit(f"no stand-in for: {', '.join(sorted(unknown))}")
    golden.SKIP = args.no_golden
    current = stamp(args.size + (":no-golden" if args.no_golden else ""))
    t_all = time.time()
    for fam, mod, s in standins:
        if only and s["repo"] not in only:
            continue
        dest = os.path.join(args.out, *s["repo"].split("/"))
        stamp_file = dest + ".stamp"
        if os.path.isdir(dest) and os.path.exists(stamp_file) and open(stamp_file).read() == current:
            print(f"{s['repo']}: up to date")
            continue
        t = time.time()
        tmp = dest + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        summary = mod.write(s, tmp, args.size, os.path.abspath(args.shared))
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        with open(stamp_file, "w") as f:
            f.write(current)
        mb = sum(summary["files"].values()) / 1e6
        print(f"{s['repo']}: {fam} {args.size}, {summary['params']:,} params, {mb:.1f} MB, "
              f"{time.time() - t:.1f} s")
    print(f"done in {time.time() - t_all:.1f} s")


if __name__ == "__main__":
    main()
