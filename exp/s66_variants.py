#!/usr/bin/env python3
"""Session 66 timing-only sources for DSKC_OVERRIDE_SOURCE: what the two GELU GEMMs' epilogues cost on
an H100 (Nsight Compute put gemm_output_dgrad at 0.123 ms there, against 0.103 in session 54's H200 run
of the same kernel; gemm_inter_fwd 0.135 against 0.132). Results are wrong in every variant but base.
Reads a generated module source (dskc compile LAYER --emit cuda) and writes into OUT_DIR
  base.cu      as built,
  dplain.cu    gemm_output_dgrad with the plain epilogue (kPlain: no GELU'(h) load, no multiply),
  dnoload.cu   gemm_output_dgrad's kDGeluSaved epilogue without the GELU'(h) TMA load and its wait
               (multiplies by what the regions hold),
  fbias.cu     gemm_inter_fwd with the bias epilogue (kBias: h only, no GELU pass, one output).
    python3 exp/s66_variants.py IN.cu OUT_DIR"""
import sys, pathlib

src = pathlib.Path(sys.argv[1]).read_text()
out = pathlib.Path(sys.argv[2])
dplain = [("  gemm_sm90_impl<kInter, kHidden, GemmEpi::kDGeluSaved>(p);\n",
           "  gemm_sm90_impl<kInter, kHidden, GemmEpi::kPlain>(p);\n")]
dnoload = [
    ("                             kEpi == GemmEpi::kDGeluSaved || kEpi == GemmEpi::kBiasDropoutResidual;\n",
     "                             kEpi == GemmEpi::kBiasDropoutResidual;\n"),
    ("    } else if constexpr (kEpi == GemmEpi::kDGeluSaved) {\n",
     "    } else if constexpr (kEpi == GemmEpi::kDGeluSaved) {\n#define DSKC_S66_NOWAIT\n"),
]
fbias = [("  gemm_sm90_impl<kInter, kHidden, GemmEpi::kBiasGeluSaveGrad>(p);\n",
          "  gemm_sm90_impl<kInter, kHidden, GemmEpi::kBias>(p);\n")]


def sub(text, pairs):
    for a, b in pairs:
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    return text


def drop_wait(text):
    # the first hfull wait after the marker (the kDGeluSaved branch's), and the marker
    i = text.index("#define DSKC_S66_NOWAIT\n")
    w = "      sm90::mbar_wait(hfull(c), hphase);\n      hphase ^= 1u;\n"
    j = text.index(w, i)
    assert j - i < 1200, "the kDGeluSaved branch's wait is not where expected"
    return text[:i] + text[i + len("#define DSKC_S66_NOWAIT\n"):j] + text[j + len(w):]


for name, ps in [("base", []), ("dplain", dplain), ("dnoload", dnoload), ("fbias", fbias)]:
    t = sub(src, ps)
    if name == "dnoload":
        t = drop_wait(t)
    (out / f"{name}.cu").write_text(t)
    print("wrote", out / f"{name}.cu")
