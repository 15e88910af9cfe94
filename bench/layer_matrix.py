#!/usr/bin/env python3
"""dskc bench over the variants issue 5 asks about, for the BERT-Large layer at (64,128) and
(16,512): default fp16 Pre-LN, stochastic_mode, Post-LN, bf16, each memory flag, all flags, tanh GELU.
Prints one markdown table (median ms fwd/bwd/total over interleaved rounds, the least total, the
spread of the totals (max - min over the rounds, % of the median), the difference from the default,
activation MiB, the median of the runs' mean SM clock during their timed iterations: dskc bench's NVML
column, nan without NVML). The first variant also runs a second time at the end of every round ("... again"):
the difference between those two rows is what the same code measures twice, the noise floor that a
difference between variants has to exceed (--no-control leaves it out). Usage:
    python3 bench/layer_matrix.py --dskc build/dskc [--iters 30] [--warmup N] [--rounds 3]
        [--only "fp16 Pre-LN,bf16"] [--env "partials:DSKC_BIAS_GRAD=partials"]... [--graph]
--only keeps the named variants (the first one kept is the baseline of the last column); each --env
adds a variant: the default config (or variant BASE's) run with the given environment variables
(NAME[@BASE]:VAR=V[,VAR=V]). --graph times every variant replayed from CUDA graphs (`dskc bench --graph`:
no host launch gaps in the numbers).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

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
    ("tanh GELU", {"gelu_approximation": "tanh"}),
]


def run_one(dskc, cfg, iters, env=None, warmup=None, graph=False):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    cmd = [dskc, "bench", f.name, "--csv", "--iters", str(iters)] + (["--warmup", str(warmup)] if warmup else [])
    cmd += ["--graph"] if graph else []
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    os.unlink(f.name)
    if r.returncode != 0:
        return None, r.stderr.strip()[:80]
    v = r.stdout.strip().split(",")
    mhz = float(v[10]) if len(v) > 10 else float("nan")  # mean SM clock of the timed iterations (NVML)
    return (float(v[5]), float(v[6]), float(v[7]), float(v[9]), mhz), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dskc", default="build/dskc")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed iterations per run before the timed ones (default: dskc bench's 10)")
    ap.add_argument("--shapes", default="64x128,16x512")
    ap.add_argument("--rounds", type=int, default=3,
                    help="each round runs every variant once (interleaved, so drifts of the GPU's speed hit all "
                         "variants alike); the table gives medians over rounds and the least total")
    ap.add_argument("--only", default="", help="comma-separated variant names to run (default: all)")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME[@BASE]:VAR=V[,VAR=V]: one more variant, the default config (or variant BASE's) "
                         "under these variables")
    ap.add_argument("--graph", action="store_true",
                    help="time every variant's forward and backward replayed from CUDA graphs (dskc bench --graph)")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds for the whole matrix: each shape gets an equal share of what is left and stops "
                         "starting rounds that would not end within it (its rows give the rounds done)")
    ap.add_argument("--no-control", action="store_true",
                    help="do not run the first variant a second time per round (the same-code control row)")
    args = ap.parse_args()
    variants = [(name, extra, {}) for name, extra in VARIANTS]
    for spec in args.env:
        name, _, assigns = spec.partition(":")
        name, _, base_name = name.partition("@")
        extra = next((e for n, e in VARIANTS if n == base_name), None) if base_name else {}
        if extra is None:
            ap.error(f"--env {spec}: no variant named {base_name}")
        variants.append((name, extra, dict(a.split("=", 1) for a in assigns.split(","))))
    if args.only:
        keep = args.only.split(",")
        unknown = [k for k in keep if k not in {v[0] for v in variants}]
        if unknown:
            ap.error(f"unknown variants {unknown}")
        variants = [v for k in keep for v in variants if v[0] == k]
    if not args.no_control:
        name, extra, env = variants[0]
        variants.append((f"{name} again", extra, env))
    print(f"| shape | variant | fwd ms | bwd ms | total ms (median of {args.rounds}) | least | spread | "
          f"vs {variants[0][0]} | activation MiB | SM MHz |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    shapes = args.shapes.split(",")
    deadline = time.monotonic() + args.time_limit
    for i_shape, shape in enumerate(shapes):
        b, s = map(int, shape.split("x"))
        runs = {name: [] for name, _, _ in variants}
        errors = {}
        shape_start = time.monotonic()
        shape_end = shape_start + (deadline - shape_start) / (len(shapes) - i_shape)
        for r in range(args.rounds):
            # --time-limit: a round is started only if one more of the average length ends in time.
            now = time.monotonic()
            if args.time_limit and r > 0 and now + (now - shape_start) / r > shape_end:
                print(f"| {b}x{s} | (time limit: {r} of {args.rounds} rounds) |", flush=True)
                break
            for name, extra, env in variants:
                cfg = dict(BASE, batch_size=b, max_seq_length=s, **extra)
                res, err = run_one(args.dskc, cfg, args.iters, env, args.warmup, args.graph)
                if res is None:
                    errors[name] = err
                else:
                    runs[name].append(res)
        first = variants[0][0]
        base = statistics.median(r[2] for r in runs[first]) if runs[first] else None
        for name, _, _ in variants:
            if not runs[name]:
                print(f"| {b}x{s} | {name} | error: {errors.get(name, '?')} |")
                continue
            fwd, bwd, tot = (statistics.median(r[i] for r in runs[name]) for i in range(3))
            totals = [r[2] for r in runs[name]]
            spread = f"{100 * (max(totals) - min(totals)) / tot:.1f}%"
            rel = f"{100 * (tot / base - 1):+.1f}%" if base else "-"
            mhz = statistics.median(r[4] for r in runs[name])
            print(f"| {b}x{s} | {name} | {fwd:.3f} | {bwd:.3f} | {tot:.3f} | {min(totals):.3f} | {spread} | {rel} | "
                  f"{runs[name][0][3]:.1f} | {mhz:.0f} |", flush=True)


if __name__ == "__main__":
    main()
