"""Elementary functions for kernels, cheaper than libm where precision allows.

`atan2(y, x)`: in float64 builds it is libm's atan2; in float32 builds a
range-reduced odd polynomial of degree 17 (max abs error 8e-9 rad in exact
arithmetic, ~2e-7 rad evaluated in f32, i.e. about one f32 ulp of pi).
Why: libm's atan2f is a call the compiler cannot inline or vectorise; in the
cloth step (one atan2 per triangle for the angle of attack, one per bending
edge for the dihedral angle) it took a third of the forward time
(benchmarks/MEASURED.md, "Moved from the code").  The polynomial is branch-free (selects), so Taichi's reverse pass
differentiates it like any other expression.
"""
import math

import taichi as ti
from taichi.lang import impl

# atan(a) ~= a * P(a^2) on [0, 1], degree 17; fitted by iteratively reweighted least
# squares (near-minimax) for absolute error, with P(0) = 1 (exact slope at 0, where
# flat cloth sits) and a P(1) = pi/4 (the two octant branches meet without a jump at
# |y| = |x|).  Max error 8e-9 rad in the value, 3.3e-6 relative in the derivative.
_ATAN_COEFFS = (1.0, -0.3333297298412297, 0.1999007487074813, -0.14183329480123347, 0.10563290788585061,
                -0.0734341425325113, 0.040838770194276564, -0.014953085430490218, 0.002575989215304497)
assert len(_ATAN_COEFFS) == 9, "_atan_poly evaluates exactly nine coefficients"


def _float64_build() -> bool:
    return impl.current_cfg().default_fp == ti.f64


@ti.func
def _atan_poly(s):
    """P(s) by Estrin's scheme: 4 dependent multiply-adds instead of Horner's 8.  The loop
    body is latency-bound (measured: Horner's chain was ~20 ns of a 58 ns bending edge)."""
    c = ti.static(_ATAN_COEFFS)
    s2 = s * s
    s4 = s2 * s2
    p03 = (c[0] + c[1] * s) + (c[2] + c[3] * s) * s2
    p47 = (c[4] + c[5] * s) + (c[6] + c[7] * s) * s2
    return p03 + (p47 + c[8] * s4) * s4


@ti.func
def atan2_poly(y, x):
    """atan2 in [-pi, pi] from the polynomial above, in the current float type.

    The ratio keeps its sign (atan is odd) and the octant is picked by selects on
    comparisons, so no abs/min/max carries the gradient: those have zero
    derivative at 0 and at ties, which would lose d/dy at y = 0, exactly where
    flat cloth sits (dihedral angle 0, no normal wind).
    """
    swap = ti.abs(y) > ti.abs(x)
    num = ti.select(swap, x, y)
    den = ti.select(swap, y, x)
    t = num / ti.select(den == 0.0, 1.0, den)      # both 0: t = 0, atan2(0, 0) = 0 as libm
    s = t * t
    r = t * _atan_poly(s)
    half_pi = ti.static(0.5 * math.pi)
    pi = ti.static(math.pi)
    upper = y >= 0.0
    return ti.select(swap, ti.select(upper, half_pi, -half_pi) - r,
                     r + ti.select(x < 0.0, ti.select(upper, pi, -pi), 0.0))


@ti.func
def atan2(y, x):
    """atan2(y, x) [rad]: libm in float64 builds, `atan2_poly` in float32 builds."""
    r = 0.0 * y
    if ti.static(_float64_build()):
        r = ti.atan2(y, x)
    else:
        r = atan2_poly(y, x)
    return r


# exp(-x) for x >= 0 as 2^-n exp(-r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2]
# (Cody-Waite: n ln2_hi is exact, fdlibm's split), exp(-r) by its Taylor polynomial: degree 13 in
# float64 (truncation below 5e-18 relative), 7 in float32 (6e-9).  x is clamped where 2^-n would
# leave the normal range (exp(-700) = 1e-304, exp(-87) = 1.6e-38; a denormal or 0 beyond).
_LN2_HI_64, _LN2_LO_64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_LN2_HI_32, _LN2_LO_32 = 0.693359375, -2.12194440e-4
_LOG2E = 1.4426950408889634


@ti.func
def _taylor_exp(r, degree: ti.template()):
    """sum_{k <= degree} r^k / k!, by Estrin's scheme in pairs (latency ~log2(degree) multiply-adds)."""
    c = ti.static([1.0 / math.factorial(k) for k in range(degree + 1)])
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    p01 = c[0] + c[1] * r
    p23 = c[2] + c[3] * r
    p45 = c[4] + c[5] * r
    p67 = c[6] + c[7] * r
    p = (p01 + p23 * r2) + (p45 + p67 * r2) * r4
    if ti.static(degree > 7):
        p89 = c[8] + c[9] * r
        p1011 = c[10] + c[11] * r
        p1213 = c[12] + c[13] * r
        p = p + ((p89 + p1011 * r2) + p1213 * r4) * r8
    return p


@ti.func
def exp_neg(x):
    """exp(-x) for a scalar x >= 0 in the current float type, to a few ulp, without a libm call.

    Why: libm's exp is a call LLVM cannot vectorise; this is plain arithmetic and an integer
    bit pattern, so a loop over lanes (the silhouette's pixel rows, `renderers.softras`) runs
    it in SIMD.  Not for Tape kernels (the bit pattern carries no gradient)."""
    r = 0.0 * x
    if ti.static(_float64_build()):
        xc = ti.min(x, 700.0)
        n = ti.floor(xc * _LOG2E + 0.5)
        rr = (n * _LN2_HI_64 - xc) + n * _LN2_LO_64
        scale = ti.bit_cast((ti.cast(1023, ti.i64) - ti.cast(n, ti.i64)) << 52, ti.f64)
        r = _taylor_exp(rr, 13) * scale
    else:
        xc = ti.min(x, 87.0)
        n = ti.floor(xc * _LOG2E + 0.5)
        rr = (n * _LN2_HI_32 - xc) + n * _LN2_LO_32
        scale = ti.bit_cast((127 - ti.cast(n, ti.i32)) << 23, ti.f32)
        r = _taylor_exp(rr, 7) * scale
    return r


@ti.func
def exp_neg_lanes(x):
    """`exp_neg` of every entry of a Vector x (entries >= 0)."""
    return ti.Vector([exp_neg(x[l]) for l in ti.static(range(x.n))])
