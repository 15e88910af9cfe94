#!/usr/bin/env python3
"""PyTorch eager BERT-Large pre-training step on the same shapes as `dskc train`: MLM (20
predictions per sequence) + NSP, fp16 autocast with dynamic loss scaling, Adam. Prints
sequences/s and TFLOP/s (6 x parameters x tokens + attention, the count dskc train uses).

    python3 bench/bert_train_torch.py [--cf examples/bert_large_adam_seq128.json] [--batch 64] [--seq 128]
"""
import argparse
import json
import time

import torch


def load_bert_config(cf_path, attn_implementation=None):
    """BertConfig from a flat HF-style model config or bing_bert's (nested "bert_model_config").
    attn_implementation: "eager" (BERT's unfused attention) or "sdpa"; None keeps the default."""
    from transformers import BertConfig

    cf = json.load(open(cf_path))
    cf = cf.get("bert_model_config", cf)
    config = BertConfig(**{k: v for k, v in cf.items() if k in BertConfig().to_dict()})
    if attn_implementation:
        config._attn_implementation = attn_implementation
    return config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cf", default="examples/bert_large_adam_seq128.json")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    from transformers import BertForPreTraining

    config = load_bert_config(args.cf)
    model = BertForPreTraining(config).cuda().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**16)
    b, s, v = args.batch, args.seq, config.vocab_size
    ids = torch.randint(0, v, (b, s), device="cuda")
    labels = torch.full((b, s), -100, device="cuda")
    labels[:, 1:21] = ids[:, 1:21]
    nsp = torch.randint(0, 2, (b,), device="cuda")
    mask = torch.ones(b, s, device="cuda", dtype=torch.long)
    seg = torch.zeros(b, s, device="cuda", dtype=torch.long)

    def step():
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(input_ids=ids, attention_mask=mask, token_type_ids=seg, labels=labels, next_sentence_label=nsp)
        scaler.scale(out.loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    n_params = sum(p.numel() for p in model.parameters())
    tokens = b * s
    flops = 6 * n_params * tokens + 12 * config.num_hidden_layers * b * s * s * config.hidden_size
    print(f"torch {torch.__version__} eager BERT ({config.num_hidden_layers} layers, hidden {config.hidden_size}), "
          f"batch {b}, seq {s}, fp16 autocast, Adam")
    print(f"| step ms | sequences/s | TFLOP/s |\n|---:|---:|---:|\n| {dt * 1e3:.1f} | {b / dt:.0f} | "
          f"{flops / dt / 1e12:.0f} |")


if __name__ == "__main__":
    main()
