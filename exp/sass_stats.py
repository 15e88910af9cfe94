#!/usr/bin/env python3
"""Per-kernel SASS instruction counts from `cuobjdump -sass` output (session 57's audit):
total, local-memory loads/stores (spills), R2UR (vector-to-uniform moves before wgmma/TMA), IMAD,
MUFU, BAR, I2F+F2I, BRA.  Usage: python3 exp/sass_stats.py MODULE.sass
The cubins come from `dskc compile LAYER.json --arch sm_90 -o X` (no GPU needed); cuobjdump runs on
the GPU machine (the CPU machine's toolkit has no cuobjdump / nvdisasm). For one kernel's line with
its HGMMA and uniform-datapath counts inside a session script, exp/common.sh's `sass_line` does the
dump and the count; this script is the whole-module form (every kernel, spills included)."""
import collections, re, sys

kernels = collections.OrderedDict()
current = None
for line in open(sys.argv[1]):
    m = re.search(r'Function : (\S+)', line)
    if m:
        current = kernels.setdefault(m.group(1), collections.Counter())
        continue
    m = re.search(r'/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)', line)
    if m and current is not None:
        current[m.group(2).split('.')[0]] += 1
cols = ['LDL', 'STL', 'R2UR', 'IMAD', 'MUFU', 'BAR', 'BRA']
print(f"| kernel | instructions | {' | '.join(cols)} | I2F+F2I |")
print('|---|' + '---:|' * (len(cols) + 2))
for name, c in kernels.items():
    print(f"| {name} | {sum(c.values())} | {' | '.join(str(c[k]) for k in cols)} | {c['I2F'] + c['F2I']} |")
