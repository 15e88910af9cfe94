#!/usr/bin/env python3
"""Session 48 variants of layernorm_fwd_bits (the first LayerNorm + the attention keep words) for
DSKC_OVERRIDE_SOURCE: reads a generated module source (dskc inspect LAYER --source) and writes
  lnfirst.cu  the row's LayerNorm and its stores before the keep words (between() after the stores),
  swar.cu     keep8's eight compares on the raw 32-bit words (hi half: x >= T<<16; lo half:
              x<<16 >= T<<16; the same bits),
  both.cu     the two together.
    python3 exp/s48_variants.py IN.cu OUT_DIR"""
import sys, pathlib

src = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
ln_old = """  between();
  if (!live) return;
  float v[S::kPer][S::kV] = {};"""
ln_new = """  if (live) {
  float v[S::kPer][S::kV] = {};"""
ln_tail_old = """    if (c < kCols) store_f<T, S::kV>(y + c, v[k]);
  }
}

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p) {"""
ln_tail_new = """    if (c < kCols) store_f<T, S::kV>(y + c, v[k]);
  }
  }
  between();
}

template <int kCols>
__device__ __forceinline__ void layernorm_fwd_impl(const LayerNormFwdParams& p) {"""
swar_old = """  for (int w = 0; w < 8; ++w) v |= static_cast<uint32_t>(dskc_rng::select_draw(d, w) >= kAttnDropoutThreshold) << w;"""
swar_new = """  for (int w = 0; w < 4; ++w) {
    const uint32_t x = dskc_rng::select_word(d, w);
    v |= static_cast<uint32_t>((x << 16) >= (kAttnDropoutThreshold << 16)) << (2 * w);
    v |= static_cast<uint32_t>(x >= (kAttnDropoutThreshold << 16)) << (2 * w + 1);
  }"""
def sub(text, pairs):
    for a, b in pairs:
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    return text
ln = [(ln_old, ln_new), (ln_tail_old, ln_tail_new)]
sw = [(swar_old, swar_new)]
for name, pairs in [("base", []), ("lnfirst", ln), ("swar", sw), ("both", ln + sw)]:
    (out / f"{name}.cu").write_text(sub(src, pairs))
    print("wrote", out / f"{name}.cu")
