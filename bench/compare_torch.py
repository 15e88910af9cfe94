#!/usr/bin/env python3
"""Side-by-side timing of one BERT layer: PyTorch eager, torch.compile (fused QKV + SDPA) and
dskc (`dskc bench --csv`), forward + backward, fp16, on the current GPU, in one run.

Prints a markdown table with ms per layer and the ratios to dskc, plus activation MiB per layer
(the memory held between forward and backward). Usage:
    python3 bench/compare_torch.py --dskc build/dskc [--shapes 64x128,16x512] [--ln pre,post] [--gelu erf,tanh]
        [--rounds 3] [--idle 3] [--no-graphs]
--rounds R times every column of a row R times, one after the other (eager, compiled, dskc, dskc all
flags, then again), and prints each column's median: single runs of one process differ by up to ~5%
on the H200.
The last column is the mean SM clock of each side's timed iterations (NVML; bench/nvml_clock.py for
torch, dskc bench's own reading for dskc): --warmup 300 compares the sustained, power-capped state.
--idle S (default 3) waits S seconds before each side's run, so that in the burst state (--warmup 10)
no side starts on a GPU the previous side has just heated: without it dskc, which runs right after the
two torch columns, measured 4-5% slower than alone (bench/NOTES.md v33).
Both torch sides are also timed with their forward + backward captured once as a CUDA graph and
replayed (PyTorch's whole-network capture: no Python or launch overhead left in the torch numbers):
the two "graph" columns, left out with --no-graphs. The plain columns launch every kernel from
Python each step, as training does without graphs; where the GPU outruns those launches they measure
the CPU, not the kernels (session 37: torch.compile 2.06 ms plain, 1.44 ms replayed, at (64,128)).
With the graph columns dskc is timed the same way too (`dskc bench --graph`: its forward and its backward
each captured as a CUDA graph after the warm-up and replayed), with and without the three memory flags,
and the ratio column compares the two replayed forms (torch.compile graph / dskc graph).
Every torch step starts with its gradients set to None, as after optimizer.zero_grad(), so its
backward writes them as dskc's does instead of adding into them.
--gelu tanh runs every side with the tanh GELU (F.gelu(approximate="tanh"); DeepSpeed's kernel's GELU;
dskc config gelu_approximation "tanh", whose GELU runs in cuBLASLt's GEMM epilogues).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from nvml_clock import SmClock


class BertLayer(torch.nn.Module):
    """The layer dskc computes (DeepSpeed's kernel layout): fused QKV, SDPA, erf (or tanh) GELU."""

    def __init__(self, hidden, heads, inter, pre_ln, p_attn=0.1, p_hidden=0.1, sdpa=True, gelu="erf"):
        super().__init__()
        self.sdpa = sdpa
        self.gelu_approx = "tanh" if gelu == "tanh" else "none"
        self.h, self.n, self.pre = hidden, heads, pre_ln
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.o = torch.nn.Linear(hidden, hidden)
        self.ln_attn = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.inter = torch.nn.Linear(hidden, inter)
        self.out = torch.nn.Linear(inter, hidden)
        self.ln_norm = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.pa, self.ph = p_attn, p_hidden

    def attn(self, x, mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n, self.h // self.n).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            c = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.pa if self.training else 0.0)
        else:  # BERT's original attention: scores, mask, softmax, dropout, context
            p = torch.softmax(q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5) + mask, dim=-1)
            c = F.dropout(p, self.pa, self.training) @ v
        return self.o(c.transpose(1, 2).reshape(b, s, self.h))

    def ffn(self, x):
        return self.out(F.gelu(self.inter(x), approximate=self.gelu_approx))

    def forward(self, x, mask):
        d = lambda t: F.dropout(t, self.ph, self.training)
        if self.pre:
            a = x + d(self.attn(self.ln_norm(x), mask))
            return a + d(self.ffn(self.ln_attn(a)))
        a = self.ln_attn(x + d(self.attn(x, mask)))
        return self.ln_norm(a + d(self.ffn(a)))


def fresh_grads(layer, x):
    """Drops the gradients (set to None, as optimizer.zero_grad does), so that the next backward writes
    them instead of adding into them: dskc's backward writes its gradients, and accumulating would
    cost torch 13 extra add kernels per step (~0.045 ms at (64,128))."""
    layer.zero_grad(set_to_none=True)
    x.grad = None


def layer_inputs(b, s, hidden, with_mask):
    """The timed step's input x (requires grad), additive attention mask (None without) and output gradient."""
    x = torch.randn(b, s, hidden, device="cuda", dtype=torch.half, requires_grad=True)
    mask = torch.zeros(b, 1, 1, s, device="cuda", dtype=torch.half) if with_mask else None
    return x, mask, torch.randn_like(x)


def time_layer(layer, b, s, hidden, iters, warmup, with_mask=True):
    x, mask, dy = layer_inputs(b, s, hidden, with_mask)
    for _ in range(warmup):
        fresh_grads(layer, x)
        layer(x, mask).backward(dy)
    torch.cuda.synchronize()
    fwd, bwd = [], []
    with SmClock(torch.cuda.current_device()) as clock:  # the SM clock of the timed iterations
        for _ in range(iters):
            fresh_grads(layer, x)
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            y = layer(x, mask)
            e[1].record()
            y.backward(dy)
            e[2].record()
            torch.cuda.synchronize()
            fwd.append(e[0].elapsed_time(e[1]))
            bwd.append(e[1].elapsed_time(e[2]))
    fwd.sort()
    bwd.sort()
    # Activation memory: bytes alive after forward that backward frees.
    del y
    fresh_grads(layer, x)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    y = layer(x, mask)
    held = torch.cuda.memory_allocated() - base - y.numel() * y.element_size()
    y.backward(dy)
    return fwd[len(fwd) // 2], bwd[len(bwd) // 2], held / 2**20, clock.mhz


def time_layer_graphed(layer, b, s, hidden, iters, warmup, with_mask=True):
    """Forward + backward captured once in a CUDA graph, replayed: the median ms of one replay and the mean
    SM clock. PyTorch's whole-network capture recipe: a few eager steps on a side stream first (they
    warm up the allocator and cuBLAS), then one captured step with the gradients set to None first.
    Dropout draws from the captured generator state, so every replay gets new masks."""
    x, mask, dy = layer_inputs(b, s, hidden, with_mask)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fresh_grads(layer, x)
            layer(x, mask).backward(dy)
    torch.cuda.current_stream().wait_stream(side)
    fresh_grads(layer, x)  # the captured backward allocates them from the graph's pool and writes them
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(x, mask).backward(dy)
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    ms = []
    with SmClock(torch.cuda.current_device()) as clock:
        for _ in range(iters):
            e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            e[0].record()
            graph.replay()
            e[1].record()
            torch.cuda.synchronize()
            ms.append(e[0].elapsed_time(e[1]))
    del graph
    torch.cuda.synchronize()
    return statistics.median(ms), clock.mhz


def time_graphed_or_nan(name, layer, b, s, iters, warmup, with_mask=True):
    """time_layer_graphed, or (nan, nan) with the reason on stderr where capture fails."""
    try:
        return time_layer_graphed(layer, b, s, 1024, iters, warmup, with_mask)
    except Exception as e:  # a capture failure leaves its column empty, the rest of the table stands
        sys.stderr.write(f"{name} at {b}x{s}: CUDA graph capture failed: {e}\n")
        torch.cuda.synchronize()
        return float("nan"), float("nan")


def run_dskc(dskc, b, s, pre, iters, warmup, extra, bench_args=()):
    cfg = {"batch_size": b, "max_seq_length": s, "hidden_size": 1024, "heads": 16, "intermediate_size": 4096,
           "attn_dropout_ratio": 0.1, "hidden_dropout_ratio": 0.1, "num_hidden_layers": 24,
           "initializer_range": 0.02, "seed": 42, "fp16": True, "pre_layer_norm": pre}
    cfg.update(extra)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    out = subprocess.run([dskc, "bench", f.name, "--csv", "--iters", str(iters), "--warmup", str(warmup),
                          *bench_args], capture_output=True, text=True)
    os.unlink(f.name)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        return None
    v = out.stdout.strip().split(",")
    mhz = float(v[10]) if len(v) > 10 else float("nan")  # dskc bench's NVML clock of its timed iterations
    return float(v[5]), float(v[6]), float(v[9]), mhz


def median_run(runs):
    """The run_dskc result (fwd, bwd, MiB) whose total is the median of the runs (None if any failed)."""
    if any(r is None for r in runs):
        return None
    return sorted(runs, key=lambda r: r[0] + r[1])[len(runs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dskc", default="build/dskc")
    ap.add_argument("--shapes", default="64x128,16x512")
    ap.add_argument("--ln", default="pre,post")
    ap.add_argument("--gelu", default="erf", help="erf, tanh or erf,tanh")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--idle", type=float, default=3.0, help="seconds of idle GPU before each side's run")
    ap.add_argument("--no-graphs", dest="graphs", action="store_false",
                    help="leave out the columns replayed from a CUDA graph (torch's and dskc's)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    for shape in args.shapes.split(","):
        b, s = map(int, shape.split("x"))
        for ln, gelu in [(ln, g) for ln in args.ln.split(",") for g in args.gelu.split(",")]:
            pre = ln == "pre"
            extra = {"gelu_approximation": "tanh"} if gelu == "tanh" else {}
            # eager: BERT's unfused attention with the additive mask; compile: SDPA (flash) + torch.compile
            layer = BertLayer(1024, 16, 4096, pre, sdpa=False, gelu=gelu).cuda().half().train()
            compiled = None
            if not args.no_compile:
                fused = BertLayer(1024, 16, 4096, pre, sdpa=True, gelu=gelu).cuda().half().train()
                compiled = torch.compile(fused)
            flags = dict(extra, attn_dropout_checkpoint=True, normalize_invertible=True, gelu_checkpoint=True)
            e_ms, c_ms, d_runs, dall_runs, e_mhz, c_mhz = [], [], [], [], [], []
            eg_ms, cg_ms, eg_mhz, cg_mhz, dg_runs, dallg_runs = [], [], [], [], [], []
            if compiled is not None:  # compile outside the timed sides (the first calls compile the graphs)
                time_layer(compiled, b, s, 1024, 1, 2, with_mask=False)
            for _ in range(args.rounds):
                time.sleep(args.idle)
                ef, eb, em, emhz = time_layer(layer, b, s, 1024, args.iters, args.warmup)
                e_ms.append(ef + eb)
                e_mhz.append(emhz)
                if compiled is None:
                    cf = cb = cm = cmhz = float("nan")
                else:
                    time.sleep(args.idle)
                    cf, cb, cm, cmhz = time_layer(compiled, b, s, 1024, args.iters, args.warmup, with_mask=False)
                c_ms.append(cf + cb)
                c_mhz.append(cmhz)
                if args.graphs:
                    time.sleep(args.idle)
                    eg, egmhz = time_graphed_or_nan("torch eager", layer, b, s, args.iters, args.warmup)
                    cg = cgmhz = float("nan")
                    if compiled is not None:
                        time.sleep(args.idle)
                        cg, cgmhz = time_graphed_or_nan("torch.compile", compiled, b, s, args.iters, args.warmup,
                                                        with_mask=False)
                    eg_ms.append(eg)
                    cg_ms.append(cg)
                    eg_mhz.append(egmhz)
                    cg_mhz.append(cgmhz)
                time.sleep(args.idle)
                d_runs.append(run_dskc(args.dskc, b, s, pre, args.iters, args.warmup, extra))
                time.sleep(args.idle)
                dall_runs.append(run_dskc(args.dskc, b, s, pre, args.iters, args.warmup, flags))
                if args.graphs:
                    time.sleep(args.idle)
                    dg_runs.append(run_dskc(args.dskc, b, s, pre, args.iters, args.warmup, extra, ["--graph"]))
                    time.sleep(args.idle)
                    dallg_runs.append(run_dskc(args.dskc, b, s, pre, args.iters, args.warmup, flags, ["--graph"]))
            rows.append((b, s, ln, gelu, statistics.median(e_ms), statistics.median(c_ms), median_run(d_runs),
                         median_run(dall_runs), em, cm, statistics.median(e_mhz), statistics.median(c_mhz),
                         (statistics.median(eg_ms), statistics.median(cg_ms), statistics.median(eg_mhz),
                          statistics.median(cg_mhz), median_run(dg_runs), median_run(dallg_runs))
                         if args.graphs else None))
            del layer, compiled
            torch.cuda.empty_cache()
    print()
    graph_head = (" torch eager graph ms | torch.compile graph ms | dskc graph ms | dskc all-flags graph ms | "
                  "compile graph/dskc graph |") if args.graphs else ""
    print("| batch | seq | LN | GELU | torch eager ms | torch.compile ms | dskc ms | dskc all-flags ms | eager/dskc | "
          f"compile/dskc |{graph_head} MiB eager | MiB compile | MiB dskc | MiB dskc all flags | "
          "SM MHz eager / compile / dskc" + (" / eager graph / compile graph / dskc graph |" if args.graphs else " |"))
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|---:|---:|" if args.graphs else "") +
          "---:|---:|---:|---:|---|")
    for b, s, ln, gelu, e, c, d, dall, em, cm, emhz, cmhz, graphed in rows:
        dt = d[0] + d[1] if d else float("nan")
        dat = dall[0] + dall[1] if dall else float("nan")
        dmhz = d[3] if d else float("nan")
        graph_cols = graph_mhz = ""
        if graphed:
            dg, dallg = graphed[4], graphed[5]
            dgt = dg[0] + dg[1] if dg else float("nan")
            dallgt = dallg[0] + dallg[1] if dallg else float("nan")
            graph_cols = (f" {graphed[0]:.3f} | {graphed[1]:.3f} | {dgt:.3f} | {dallgt:.3f} | "
                          f"{graphed[1] / dgt:.2f} |")
            graph_mhz = f" / {graphed[2]:.0f} / {graphed[3]:.0f} / {dg[3] if dg else float('nan'):.0f}"
        print(f"| {b} | {s} | {ln} | {gelu} | {e:.3f} | {c:.3f} | {dt:.3f} | {dat:.3f} | {e / dt:.2f} | {c / dt:.2f} |"
              f"{graph_cols} {em:.0f} | {cm:.0f} | {d[2] if d else float('nan'):.0f} | "
              f"{dall[2] if dall else float('nan'):.0f} | {emhz:.0f} / {cmhz:.0f} / {dmhz:.0f}{graph_mhz} |")


if __name__ == "__main__":
    main()
