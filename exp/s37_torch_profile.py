#!/usr/bin/env python3
"""Session 37: where torch.compile's layer spends its GPU time (per-kernel CUDA time of the compiled
BERT layer, forward + backward, burst), to set next to `dskc bench --profile`. Run from the repo root:
python3 exp/s37_torch_profile.py [BxS ...]"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench")
from compare_torch import BertLayer, fresh_grads  # noqa: E402

for shape in sys.argv[1:] or ["64x128", "16x512"]:
    b, s = map(int, shape.split("x"))
    layer = torch.compile(BertLayer(1024, 16, 4096, True, sdpa=True).cuda().half().train())
    x = torch.randn(b, s, 1024, device="cuda", dtype=torch.half, requires_grad=True)
    dy = torch.randn_like(x)
    for _ in range(10):
        fresh_grads(layer, x)
        layer(x, None).backward(dy)
    torch.cuda.synchronize()
    n = 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fresh_grads(layer, x)  # the session-37 run did not: 13 gradient-accumulation adds per step
            layer(x, None).backward(dy)
        torch.cuda.synchronize()
    agg = {}
    for e in prof.events():  # kernels only (device-side events), summed by name
        if e.device_type == torch.autograd.DeviceType.CUDA:
            ms, cnt = agg.get(e.name, (0.0, 0))
            agg[e.name] = (ms + e.time_range.elapsed_us() / 1000.0, cnt + 1)
    rows = sorted(((k, ms / n, cnt / n) for k, (ms, cnt) in agg.items()), key=lambda r: -r[1])
    print(f"\ntorch.compile {shape}: per-step GPU time by kernel (mean of {n} steps, ms)")
    total = 0.0
    for name, ms, cnt in rows:
        total += ms
        print(f"  {ms:8.4f}  x{cnt:<4.1f} {name[:110]}")
    print(f"  {total:8.4f}  sum")
