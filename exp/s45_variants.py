#!/usr/bin/env python3
"""Timing-only variants of a generated module source (session 45, bias_gelu_bwd), for
DSKC_OVERRIDE_SOURCE: python3 exp/s45_variants.py IN.cu OUT.cu VARIANT
  nopdf: GELU' without its second exp2 (the pdf from two FMAs: one MUFU less per element; wrong values)
  ident: GELU' = x·x² + x (no MUFU, a few FMAs: the pass's memory floor; wrong values)
  onexp: GELU' with one exp2: Φ(−|x|) = t·e·R(t)/2 and x·φ(x) from the same e = e^(−x²/2), R a degree-8
         fit of erfcx(z)/t (relative 2e-7 in fp32): two MUFU per element instead of three (right values)"""
import sys

src, dst, variant = sys.argv[1:4]
s = open(src).read()
cdf = "    const float cdf = normal_cdf(x, x2);\n"
pdf = "    const float pdf = exp2_approx(fmaf(x2, -0.721347511f, -1.32574809f));  // e^(−x²/2)/√(2π)\n"
assert s.count(cdf) == 1 and s.count(pdf) == 1, "gelu_grad's lines not found once"
if variant == "nopdf":
    s = s.replace(pdf, "    const float pdf = fmaf(x2, -0.01f, 0.4f);\n")
elif variant == "ident":
    s = s.replace(cdf, "    const float cdf = x;\n").replace(pdf, "    const float pdf = x2;\n")
elif variant == "onexp":
    ret = "    return fmaf(x, pdf, cdf);\n"
    assert s.count(ret) == 1
    s = s.replace(cdf, "").replace(pdf, "").replace(ret, """    const float t = rcp_approx(fmaf(fabsf(x), 0.353553385f, 1.f));
    const float e = exp2_approx(x2 * -0.721347511f);
    constexpr float r8[9] = {-0.029424533f, 0.141748652f, -0.242478549f, 0.13774319f, -0.0124179395f,
                             0.100961849f, 0.121649198f, 0.141174138f, 0.141043991f};
    float r = r8[0];
#pragma unroll
    for (int i = 1; i <= 8; ++i) r = fmaf(r, t, r8[i]);
    const float h = t * e * r;
    const float cdf = x >= 0.f ? 1.f - h : h;
    return fmaf(x * 0.398942280f, e, cdf);
""")
else:
    sys.exit(f"unknown variant {variant}")
open(dst, "w").write(s)
