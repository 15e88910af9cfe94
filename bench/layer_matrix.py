#!/usr/bin/env python3
"""dskc bench over the variants issue 5 asks about, for the BERT-Large layer at (64,128) and
(16,512): default fp16 Pre-LN, stochastic_mode, Post-LN, bf16, each memory flag, all flags.
Prints one markdown table (ms fwd/bwd/total, TFLOP/s, activation MiB). Usage:
    python3 bench/layer_matrix.py --dskc build/dskc [--iters 30]
"""
import argparse
import json
import os
import subprocess
import tempfile

BASE = {"hidden_size": 1024, "heads": 16, "intermediate_size": 4096, "attn_dropout_ratio": 0.1,
        "hidden_dropout_ratio": 0.1, "num_hidden_layers": 24, "initializer_range": 0.02, "seed": 42,
        "fp16": True, "pre_layer_norm": True}
VARIANTS = [
    ("fp16 Pre-LN", {}),
    ("stochastic_mode", {"stochastic_mode": True}),
    ("Post-LN", {"pre_layer_norm": False}),
    ("bf16", {"fp16": False, "bf16": True}),
    ("attn_dropout_checkpoint", {"attn_dropout_checkpoint": True}),
    ("normalize_invertible", {"normalize_invertible": True}),
    ("gelu_checkpoint", {"gelu_checkpoint": True}),
    ("all three flags", {"attn_dropout_checkpoint": True, "normalize_invertible": True, "gelu_checkpoint": True}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dskc", default="build/dskc")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--shapes", default="64x128,16x512")
    args = ap.parse_args()
    print("| shape | variant | fwd ms | bwd ms | total ms | TFLOP/s | activation MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for shape in args.shapes.split(","):
        b, s = map(int, shape.split("x"))
        for name, extra in VARIANTS:
            cfg = dict(BASE, batch_size=b, max_seq_length=s, **extra)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(cfg, f)
            r = subprocess.run([args.dskc, "bench", f.name, "--csv", "--iters", str(args.iters)],
                               capture_output=True, text=True)
            os.unlink(f.name)
            if r.returncode != 0:
                print(f"| {b}x{s} | {name} | error: {r.stderr.strip()[:80]} |")
                continue
            v = r.stdout.strip().split(",")
            print(f"| {b}x{s} | {name} | {float(v[5]):.3f} | {float(v[6]):.3f} | {float(v[7]):.3f} | {v[8]} | {v[9]} |",
                  flush=True)


if __name__ == "__main__":
    main()
