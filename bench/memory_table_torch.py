#!/usr/bin/env python3
"""PyTorch eager's column of the guide's memory table: the largest BERT pre-training micro-batch
that fits in GPU memory under each cap, found with real training steps, in the same JSON format
as `dskc bench-memory --json`.

The step is bench/bert_train_torch.py's (Hugging Face BertForPreTraining, fp16 autocast, dynamic
loss scaling, fused Adam with fp32 weights, gradients and moments) on full-length sequences with
--max-predictions masked positions per sequence; like bing_bert and dskc, the MLM head runs on
the masked positions only (--full-logits: HF's stock forward, logits for every token). A cap is
torch.cuda.set_per_process_memory_fraction(cap / total): the caching allocator refuses to reserve
more than that (bench/NOTES.md says what it covers). Each probe: one step, peak allocated and
reserved bytes; on torch.cuda.OutOfMemoryError everything the step held is dropped and the cache
emptied. The search is cli/batch_search.h's, ported below.

    python3 bench/memory_table_torch.py --cf examples/bert_large_adam_seq128.json --seq 128 \\
        --memory-cap-gib 32,none --json out/torch_128.json
"""
import argparse
import gc
import json
import math
import os
import sys
import time

GIB = float(1 << 30)
MIB = float(1 << 20)


# ---- the search (a port of cli/batch_search.h; keep the two in step) -------------------------

def _cap_le(a, b):
    """a <= b where 0 means no cap (infinite)."""
    return b == 0 or (a != 0 and a <= b)


def _fit_line(history, prior_intercept=None):
    fits = {}
    for p in history:
        if p["fits"]:
            fits[p["batch"]] = p["peak_bytes"]
    pts = sorted(fits.items())
    if len(pts) == 1 and prior_intercept is not None and prior_intercept >= 0:
        b, peak = pts[0]
        slope = (peak - prior_intercept) / b
        return (slope, prior_intercept) if slope > 0 else None
    if len(pts) < 2:
        return None
    hb, hp = pts[-1]
    lb, lp = pts[0]
    for b, peak in pts:
        if 2 * b <= hb:
            lb, lp = b, peak
    slope = (hp - lp) / (hb - lb)
    return (slope, hp - slope * hb) if slope > 0 else None


def find_largest_batch(probe_fn, start_batch, max_batch, cap, predict_bytes, history, prior_fixed=None,
                       overhead_counts_under_cap=False):
    """Largest batch in [0, max_batch] that fits; probe_fn(batch, cap) -> dict with fits, peak_bytes,
    overhead_bytes. history (every probe of this configuration, any cap) is appended to."""
    r = {"probes": 0}
    lo, hi = 0, max_batch + 1
    for p in history:
        if p["fits"] and (_cap_le(p["memory_cap_bytes"], cap) or
                          p["peak_bytes"] + (p["overhead_bytes"] if overhead_counts_under_cap else 0) <= cap):
            lo = max(lo, p["batch"])
        if not p["fits"] and _cap_le(cap, p["memory_cap_bytes"]):
            hi = min(hi, p["batch"])
    lo = min(lo, max_batch)

    def probe(b):
        nonlocal lo, hi
        o = probe_fn(b, cap)
        o["batch"], o["memory_cap_bytes"] = b, cap
        history.append(o)
        r["probes"] += 1
        if o["fits"]:
            lo = max(lo, b)
        else:
            hi = min(hi, b)
        return o["fits"]

    def bisect():
        while hi - lo > 1:
            probe(lo + (hi - lo) // 2)

    if lo == 0 and hi > 1 and not probe(min(max(start_batch, 1), hi - 1)):
        bisect()
    if hi - lo > 1 and _fit_line(history, prior_fixed) is None:
        probe(min(2 * lo, hi - 1))
    direction = 0
    for _ in range(2):
        if hi - lo <= 1:
            break
        line = _fit_line(history, prior_fixed)
        if line is None:
            break
        slope, intercept = line
        budget = float(predict_bytes)
        if cap == 0 or overhead_counts_under_cap:
            for p in history:
                if p["fits"]:
                    budget = min(budget, predict_bytes - p["overhead_bytes"])
        g = int(min(max(math.floor((budget - intercept) / slope), lo + 1), hi - 1))
        if probe(g):
            direction = 1
            if g + 1 < hi and not probe(g + 1):
                break
        else:
            direction = -1
            if g - 1 > lo:
                probe(g - 1)
            break
    step = 2
    while hi - lo > 1:
        c = min(lo + step, hi - 1) if direction >= 0 else max(hi - step, lo + 1)
        f = probe(c)
        if (not f) if direction >= 0 else f:
            break
        step *= 2
    bisect()

    r["largest_batch"] = lo
    r["at_max_batch"] = lo == max_batch
    r["peak_bytes"] = max([p["peak_bytes"] for p in history if p["fits"] and p["batch"] == lo] or [0])
    line = _fit_line(history)
    r["marginal_bytes_per_seq"], r["fixed_bytes"] = line if line else (0.0, 0.0)
    return r


def parse_caps(s):
    caps = []
    for item in s.split(","):
        if item in ("none", "0"):
            caps.append(0)
            continue
        try:
            gib = float(item)
        except ValueError:
            gib = float("nan")
        if not math.isfinite(gib) or gib <= 0:
            raise SystemExit(f"--memory-cap-gib: '{item}' is not a positive number of GiB (or 'none')")
        caps.append(int(gib * GIB))
    return sorted(set(caps), key=lambda c: (c == 0, c))


def cap_label(cap):
    return f"{cap / GIB:g} GiB" if cap else "none"


# ---- the PyTorch step --------------------------------------------------------------------------

class TorchProber:
    def __init__(self, args):
        import torch
        import torch.nn.functional as F
        from transformers import BertForPreTraining

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bert_train_torch import load_bert_config

        self.torch, self.F = torch, F
        self.seq, self.max_pred, self.full_logits = args.seq, args.max_predictions, args.full_logits
        config = load_bert_config(args.cf, args.attn)
        self.vocab = config.vocab_size
        with torch.device("cuda"):
            self.model = BertForPreTraining(config)
        self.model.train()
        self.attn = getattr(self.model.config, "_attn_implementation", "eager")
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, fused=True)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self._new_scaler()
        self.total = torch.cuda.get_device_properties(0).total_memory
        self.step(1)  # allocates the optimizer state (dskc allocates it when the backend is built)
        torch.cuda.synchronize()

    def _new_scaler(self):
        self.scaler = self.torch.amp.GradScaler("cuda", init_scale=2.0**16)

    def step(self, b):
        torch, F = self.torch, self.F
        s, v, p = self.seq, self.vocab, self.max_pred
        ids = torch.randint(1, v, (b, s), device="cuda")
        mask = torch.ones(b, s, dtype=torch.long, device="cuda")
        seg = (torch.arange(s, device="cuda") >= s // 2).long().expand(b, s)
        pos = torch.arange(1, p + 1, device="cuda").expand(b, p)
        mlm_ids = torch.randint(1, v, (b, p), device="cuda")
        nsp = torch.arange(b, device="cuda") % 2
        with torch.autocast("cuda", dtype=torch.float16):
            if self.full_logits:
                labels = torch.full((b, s), -100, dtype=torch.long, device="cuda").scatter_(1, pos, mlm_ids)
                loss = self.model(input_ids=ids, attention_mask=mask, token_type_ids=seg, labels=labels,
                                  next_sentence_label=nsp).loss
            else:
                seq_out, pooled = self.model.bert(input_ids=ids, attention_mask=mask, token_type_ids=seg,
                                                  return_dict=False)[:2]
                h = torch.gather(seq_out, 1, pos.unsqueeze(-1).expand(b, p, seq_out.size(-1)))
                scores = self.model.cls.predictions(h)
                nsp_scores = self.model.cls.seq_relationship(pooled)
                loss = F.cross_entropy(scores.reshape(-1, v).float(), mlm_ids.reshape(-1)) + \
                    F.cross_entropy(nsp_scores.float(), nsp)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)

    def set_cap(self, cap):
        torch = self.torch
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / self.total) if cap else 1.0)

    def probe(self, b, cap):
        torch = self.torch
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = {"batch": b, "memory_cap_bytes": cap, "fits": False, "peak_bytes": 0, "overhead_bytes": 0}
        err = None
        try:
            self.step(b)
            torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError as e:
            err = str(e).strip().splitlines()[0]
        except RuntimeError as e:  # cuBLAS / cuDNN workspace failures surface as RuntimeError
            if "out of memory" not in str(e).lower() and "ALLOC_FAILED" not in str(e):
                raise
            err = str(e).strip().splitlines()[0]
        if err is None:
            alloc, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
            out.update(fits=True, peak_bytes=alloc, peak_reserved_bytes=reserved, overhead_bytes=reserved - alloc)
        else:
            out["note"] = err[:300]
            # The failed step's tensors died with the exception; drop gradients and the scaler's
            # per-step state (a half-done step leaves it expecting update()).
            self.opt.zero_grad(set_to_none=True)
            self._new_scaler()
        gc.collect()
        torch.cuda.empty_cache()
        out["seconds"] = time.perf_counter() - t0
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cf", default="examples/bert_large_adam_seq128.json")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--memory-cap-gib", default="none", help="comma-separated GiB caps; none = the whole GPU")
    ap.add_argument("--max-batch", type=int, default=None, help="default 4096 x 128 / seq")
    ap.add_argument("--start-batch", type=int, default=None, help="default 1024 / seq")
    ap.add_argument("--max-predictions", type=int, default=None, help="default 20 at seq <= 128, 80 at 512")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                    help="HF attention: eager (BERT's unfused attention, default) or sdpa")
    ap.add_argument("--full-logits", action="store_true", help="HF's stock MLM head (logits for every token)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    caps = parse_caps(args.memory_cap_gib)
    max_batch = args.max_batch or max(1, 4096 * 128 // args.seq)
    start = args.start_batch or max(1, 1024 // args.seq)
    if args.max_predictions is None:
        args.max_predictions = 80 if args.seq >= 512 else max(1, math.ceil(0.15 * args.seq))
    if not 1 <= args.max_predictions < args.seq:
        raise SystemExit(f"--max-predictions must be in [1, {args.seq - 1}]")

    t_start = time.perf_counter()
    pr = TorchProber(args)
    torch = pr.torch
    free0, total = torch.cuda.mem_get_info()
    budget_none = free0 + torch.cuda.memory_reserved()  # what the allocator could reach with no cap
    config = f"torch_eager_{pr.attn}" + ("_full_logits" if args.full_logits else "")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)} ({total / GIB:.1f} GiB): "
          f"{pr.n_params / 1e6:.0f}M parameters, seq {args.seq}, fp16 autocast, fused Adam, attention "
          f"{pr.attn}, {args.max_predictions} predictions/seq{' (full logits)' if args.full_logits else ''}; "
          f"setup {time.perf_counter() - t_start:.1f} s", flush=True)
    out = {"tool": "torch", "version": torch.__version__, "device": torch.cuda.get_device_name(0),
           "device_total_bytes": total, "device_free_bytes_at_start": free0, "model_config": args.cf,
           "parameters": pr.n_params, "seq": args.seq, "dtype": "fp16", "max_predictions_per_seq": args.max_predictions,
           "optimizer": "Adam", "layer": config, "max_batch": max_batch,
           "counted": "tensors of the caching allocator (peak_bytes: allocated; the cap limits reserved); not the "
                      "CUDA context or cuBLAS handle state", "results": []}
    history, n_probes = [], 0
    for cap in caps:
        pr.set_cap(cap)
        print(f"== {config}, cap {cap_label(cap)}", flush=True)
        first = len(history)

        def probe_fn(b, c):
            nonlocal n_probes
            o = pr.probe(b, c)
            n_probes += 1
            if o["fits"]:
                what = (f"fits, peak {o['peak_bytes'] / GIB:.2f} GiB allocated, {o['peak_reserved_bytes'] / GIB:.2f} "
                        f"reserved ({o['peak_bytes'] / MIB / b:.1f} MiB/seq)")
            else:
                what = "does not fit: " + o["note"][:140]
            print(f"  probe {n_probes}: batch {b}: {what}, {o['seconds']:.1f} s", flush=True)
            return o

        r = find_largest_batch(probe_fn, start, max_batch, cap, cap if cap else budget_none, history,
                               overhead_counts_under_cap=True)
        lb = r["largest_batch"]
        print(f"  => {config}, cap {cap_label(cap)}: largest micro-batch {lb}"
              f"{' (the --max-batch bound)' if r['at_max_batch'] else ''}, peak {r['peak_bytes'] / GIB:.2f} GiB "
              f"({r['peak_bytes'] / MIB / lb if lb else 0:.1f} MiB/seq; marginal "
              f"{r['marginal_bytes_per_seq'] / MIB:.1f} MiB/seq), {r['probes']} probes", flush=True)
        out["results"].append({
            "config": config, "flags": [], "memory_cap_gib": cap / GIB if cap else None, "memory_cap_bytes": cap,
            "largest_batch": lb, "at_max_batch": r["at_max_batch"], "peak_bytes": r["peak_bytes"],
            "peak_bytes_per_seq": r["peak_bytes"] / lb if lb else 0.0,
            "marginal_bytes_per_seq": r["marginal_bytes_per_seq"], "fixed_bytes": r["fixed_bytes"],
            "probe_count": r["probes"], "probes": history[first:]})
        out["total_probes"] = n_probes
        out["seconds"] = time.perf_counter() - t_start
        if args.json:  # after every cap: a run stopped by a time limit keeps what it measured
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f, indent=2)
                f.write("\n")
            os.replace(tmp, args.json)
    if args.json:
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
