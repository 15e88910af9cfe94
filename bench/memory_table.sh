#!/usr/bin/env bash
# The guide's memory table (BERT-Large micro-batches vs memory flags) for dskc on the GPU machine:
# for seq 128 and 512, the largest pre-training micro-batch that fits with no flag, each memory
# flag, and all three, under a 32 GiB cap and on the whole GPU, next to PyTorch eager under the
# same caps. One `dskc bench-memory` process per sequence length (all flag sets and caps, real
# training steps; bench/NOTES.md says what is counted), one bench/memory_table_torch.py process
# per sequence length; then a markdown table on stdout and in $OUT/memory_table.md.
#
# Usage (on the GPU machine, repository root): bash bench/memory_table.sh
#   env: OUT (logs, JSON, table; default ./out), DSKC (default build-gpu/dskc, built if missing),
#        SEQS ("128 512"), CAPS ("32,none"), FLAG_SETS, TORCH (1; 0 skips PyTorch),
#        TORCH_ATTN (eager; "eager sdpa" adds an SDPA column), MODE=table (only rebuild the
#        table from the JSON already in $OUT), DSKC_TIMEOUT / TORCH_TIMEOUT (s per process; JSON is
#        written after every result, so a stopped run keeps what it measured).
# Expected: about 25-35 probes per sequence length for dskc (each a fresh backend + one step,
# ~2-4 s), about 10 for PyTorch; 3-4 minutes in all with a warm kernel cache.
set -u
OUT=${OUT:-$PWD/out}
DSKC=${DSKC:-build-gpu/dskc}
SEQS=${SEQS:-"128 512"}
CAPS=${CAPS:-32,none}
FLAG_SETS=${FLAG_SETS:-none,attention_dropout_checkpoint,normalize_invertible,gelu_checkpoint,all}
TORCH=${TORCH:-1}
TORCH_ATTN=${TORCH_ATTN:-eager}
MODE=${MODE:-all}
CF=examples/bert_large_adam_seq128.json  # BERT-Large (bert_large_lamb.json is the same model)
mkdir -p "$OUT"
export DSKC_CACHE_DIR=${DSKC_CACHE_DIR:-$PWD/build-gpu/cache}
t0=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s)"; }

if [ "$MODE" != table ]; then
  if [ ! -x "$DSKC" ]; then
    step "build $DSKC"
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
    ninja -C build-gpu dskc > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
  fi
  nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>/dev/null
  for seq in $SEQS; do
    step "dskc bench-memory, seq $seq"
    timeout ${DSKC_TIMEOUT:-420} "$DSKC" bench-memory --cf $CF --seq "$seq" --dtype fp16 --flag-sets "$FLAG_SETS" \
      --memory-cap-gib "$CAPS" --json "$OUT/memory_dskc_$seq.json" 2>&1 | tee "$OUT/memory_dskc_$seq.log"
    echo "rc=${PIPESTATUS[0]}"
    if [ "$TORCH" = 1 ]; then
      for attn in $TORCH_ATTN; do
        step "PyTorch eager ($attn attention), seq $seq"
        PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-240} python3 bench/memory_table_torch.py --cf $CF --seq "$seq" --attn "$attn" \
          --memory-cap-gib "$CAPS" --json "$OUT/memory_torch_${attn}_$seq.json" 2>&1 \
          | grep -v -E "^\s*(warnings\.warn|/.*Warning)" | tee "$OUT/memory_torch_${attn}_$seq.log"
        echo "rc=${PIPESTATUS[0]}"
      done
    fi
  done
fi

step "table"
python3 - "$OUT" <<'EOF' | tee "$OUT/memory_table.md"
import glob, json, os, sys
out = sys.argv[1]
runs = []
for path in sorted(glob.glob(os.path.join(out, "memory_dskc_*.json")) + glob.glob(os.path.join(out, "memory_torch_*.json"))):
    try:
        runs.append(json.load(open(path)))
    except (OSError, ValueError) as e:
        print(f"(skipping {path}: {e})", file=sys.stderr)
if not runs:
    sys.exit("no memory_*.json in " + out)
GIB, MIB = float(1 << 30), float(1 << 20)
names = {"none": "no flag", "all": "all three flags"}
cols, cells, total, device, gpu_bytes = [], {}, {}, None, {}
for run in runs:
    device = device or run["device"]
    total.setdefault(run["tool"], [0, 0.0])
    total[run["tool"]][0] += run.get("total_probes", 0)
    total[run["tool"]][1] += run.get("seconds", 0.0)
    for r in run["results"]:
        col = ("dskc, " + names.get(r["config"], r["config"])) if run["tool"] == "dskc" else \
            "PyTorch eager" + ("" if r["config"] == "torch_eager_eager" else f" ({r['config'][12:]})")
        if col not in cols:
            cols.append(col)
        cap = r["memory_cap_bytes"]
        row = (run["seq"], cap == 0, cap)
        gpu_bytes.setdefault(run["seq"], run["device_total_bytes"])
        cells[(row, col)] = r
rows = sorted({k[0] for k in cells})
def cap_name(row):
    return f"whole GPU ({gpu_bytes[row[0]] / GIB:.0f} GiB)" if row[1] else f"{row[2] / GIB:g} GiB cap"
def cell(r):
    if r is None:
        return "-"
    b = r["largest_batch"]
    return "OOM" if b == 0 else (f"≥{b}" if r["at_max_batch"] else str(b))
print(f"Largest BERT-Large pre-training micro-batch that fits ({device}, fp16, full-length sequences, "
      "one real training step per probe):\n")
print("| seq | GPU memory | " + " | ".join(cols) + " |")
print("|---:|---|" + "---:|" * len(cols))
for row in rows:
    print(f"| {row[0]} | {cap_name(row)} | " + " | ".join(cell(cells.get((row, c))) for c in cols) + " |")
print("\nPeak memory per sequence at that micro-batch (MiB; marginal MiB per extra sequence in brackets) "
      "and probes run:\n")
print("| seq | GPU memory | " + " | ".join(cols) + " |")
print("|---:|---|" + "---:|" * len(cols))
for row in rows:
    vals = []
    for c in cols:
        r = cells.get((row, c))
        if r is None or not r["largest_batch"]:
            vals.append("-" if r is None else f"- ({r['probe_count']} probes)")
        else:
            vals.append(f"{r['peak_bytes_per_seq'] / MIB:.0f} [{r['marginal_bytes_per_seq'] / MIB:.0f}] "
                        f"({r['probe_count']} probes)")
    print(f"| {row[0]} | {cap_name(row)} | " + " | ".join(vals) + " |")
print("\n" + ", ".join(f"{tool}: {n} probes in {s:.0f} s" for tool, (n, s) in total.items()))
EOF
echo "wrote $OUT/memory_table.md ($(( $(date +%s) - t0 )) s in all)"
