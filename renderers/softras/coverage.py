"""The coverage law of the soft rasterizer, and its adjoints, in one place.

For pixel p and face j, with d the NDC distance from p to the face's edges and
x = +-d^2 / sigma (+ inside the projected triangle, - outside):

    D_j(p) = sigmoid(x)                     the face's coverage of the pixel,
    log(1 - D) = -softplus(x)               one pair's term of S(p) = sum_j log(1 - D_j),
    A(p) = 1 - exp(c S(p))                  the silhouette, c = 1 (SoftRas) or 1/2 (`closed`),
    dlog(1 - D)/dx = -sigmoid(x)            the adjoint, and dA/dS = -c exp(c S).

Pairs past the cutoff (outside and d^2 >= r2 = sigma ln(1/coverage_eps - 1)) are taken as D = 0.

The law is evaluated in three forms, all here, because the passes need different arithmetic:
- `log1m_coverage(x)`: -softplus(x) for Taichi's reverse mode (the colour passes: `pairs.py`);
- `log1m_coverage_step`: the silhouette's forward in product form, -(inside x) into a sum and
  1 + exp(-|x|) into a product whose log is taken once per pixel (one exp per pair instead of an exp
  and a log; `pairs.py`'s `bin` with libm's exp, `lanes.py` with `exp_neg`, which vectorises);
- `log1m_coverage_adjoint`: dL/d(d^2) of one pair, written out (the silhouette's backward passes).
The squared distance to a segment and its adjoint are `seg_d2_edge` / `seg_d2_grad`; a triangle's
inside test reads the signs of its edge functions (`tri_inside`).  All are free functions of their
arguments: the stages call them with their own fields.
"""
import taichi as ti

from tigradsim.core.fastmath import exp_neg


# ------------------------------------------------------------------ distances
@ti.func
def edge(a, b):
    """The segment a -> b in NDC (x, y of a and b): its vector and 1 / its squared length."""
    e = ti.Vector([b[0] - a[0], b[1] - a[1]])
    return e, 1.0 / (e[0] * e[0] + e[1] * e[1] + 1e-30)


@ti.func
def seg_d2_edge(px, py, a, e, inv_l):
    """Squared NDC distance from (px, py) to the segment from a along e (`edge`)."""
    t = ti.min(ti.max(((px - a[0]) * e[0] + (py - a[1]) * e[1]) * inv_l, 0.0), 1.0)
    dx = px - a[0] - t * e[0]
    dy = py - a[1] - t * e[1]
    return dx * dx + dy * dy


@ti.func
def seg_d2(px, py, a, b):
    """Squared NDC distance from (px, py) to the segment a b."""
    e, inv_l = edge(a, b)
    return seg_d2_edge(px, py, a, e, inv_l)


@ti.func
def area2(a, b, c):
    """Twice the signed NDC area of triangle a, b, c (positive counter-clockwise)."""
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])


@ti.func
def tri_inside(a, b, c, px, py):
    """Whether (px, py) lies in triangle a, b, c (either winding): every barycentric w_k = e_k / area >= 0,
    read off the signs of the edge functions e_k, without the divisions; a, b, c: the corners' NDC x, y."""
    area = area2(a, b, c)
    e0 = (c[0] - b[0]) * (py - b[1]) - (c[1] - b[1]) * (px - b[0])
    e1 = (a[0] - c[0]) * (py - c[1]) - (a[1] - c[1]) * (px - c[0])
    e2 = (b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0])
    return ti.select(area > 0.0, ti.min(e0, ti.min(e1, e2)) >= 0.0, ti.max(e0, ti.max(e1, e2)) <= 0.0)


@ti.func
def tri_d2(a, b, c, px, py):
    """Squared NDC distance from (px, py) to the nearest edge of triangle a, b, c."""
    return ti.min(seg_d2(px, py, a, b), ti.min(seg_d2(px, py, b, c), seg_d2(px, py, c, a)))


@ti.func
def face_edges(a, b, c):
    """`edge` of a face's three edges ab, bc, ca: (e_ab, 1/|e_ab|^2, e_bc, ..., 1/|e_ca|^2)."""
    eab, lab = edge(a, b)
    ebc, lbc = edge(b, c)
    eca, lca = edge(c, a)
    return eab, lab, ebc, lbc, eca, lca


@ti.func
def edge_d2s(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca):
    """Squared NDC distances from (px, py) to a face's edges ab, bc, ca (`face_edges`)."""
    return seg_d2_edge(px, py, a, eab, lab), seg_d2_edge(px, py, b, ebc, lbc), seg_d2_edge(px, py, c, eca, lca)


@ti.func
def edge_lines(a, b, c, eab, lab, ebc, lbc, eca, lca):
    """The face's edges ab, bc, ca as lines n . p = o with unit outward normals n: (n0, o0, n1, o1, n2, o2)."""
    s = ti.select(area2(a, b, c) > 0.0, 1.0, -1.0)   # the winding
    n0 = (s * ti.sqrt(lab)) * ti.Vector([eab[1], -eab[0]])
    n1 = (s * ti.sqrt(lbc)) * ti.Vector([ebc[1], -ebc[0]])
    n2 = (s * ti.sqrt(lca)) * ti.Vector([eca[1], -eca[0]])
    return n0, n0[0] * a[0] + n0[1] * a[1], n1, n1[0] * b[0] + n1[1] * b[1], n2, n2[0] * c[0] + n2[1] * c[1]


# ------------------------------------------------------------------- coverage
@ti.func
def coverage_logit(inside, d2, sigma):
    """x = +-d^2 / sigma (+ inside): D = sigmoid(x)."""
    return ti.select(inside, d2, -d2) / sigma


@ti.func
def log1m_coverage(x):
    """log(1 - D) = log(1 - sigmoid(x)) = -softplus(x), in a form safe for large |x| (differentiable)."""
    return -(ti.max(x, 0.0) + ti.log(1.0 + ti.exp(-ti.abs(x))))


@ti.func
def coverage_exp(x, lanes: ti.template()):
    """exp(-x) for x >= 0: libm's, or (lanes) `exp_neg`, plain arithmetic that LLVM packs into SIMD."""
    r = 0.0 * x
    if ti.static(lanes):
        r = exp_neg(x)
    else:
        r = ti.exp(-x)
    return r


@ti.func
def log1m_coverage_step(log_sum, prod, x, inside, within, lanes: ti.template()):
    """One pair's term of S = sum log(1 - D) in product form, x = d^2 / sigma >= 0:
    log(1 - D) = -(x + log(1 + exp(-x))) inside, -log(1 + exp(-x)) outside, so the pair adds -inside x to
    `log_sum` and multiplies `prod` by 1 + within exp(-x) (inside, within: 1.0 or 0.0; within: the pair
    passes the cutoff).  S = log_sum - log(prod) (`silhouette_sum`).  Forward only: one exp per pair."""
    return log_sum - inside * x, prod * (1.0 + within * coverage_exp(x, lanes))


@ti.func
def silhouette_sum(log_sum, prod):
    """S from `log1m_coverage_step`'s sums.  prod <= 2^(pairs at the pixel), so it passes the float range only
    with more than 127 pairs (f32); then the log is inf, S -inf and A = 1, which is what 1 - prod(1 - D), with
    prod(1 - D) = 1 / prod below 2^-128, rounds to."""
    return log_sum - ti.log(prod)


@ti.func
def silhouette_alpha(S, power: ti.template()):
    """A = 1 - exp(c S) (c = `power`); 0 without an exp where no face is within the cutoff (S = 0)."""
    alpha = 0.0
    if S != 0.0:
        alpha = 1.0 - ti.exp(power * S)
    return alpha


@ti.func
def softmax_weight(x, z, zmax, gamma):
    """A face's depth-softmax weight D exp((z - zmax) / gamma).  z <= zmax (same arithmetic as in the binning),
    so the exponent is <= 0; no clamp: a min() would drop the gradient of the face at the max."""
    return ti.exp((z - zmax) / gamma) / (1.0 + ti.exp(-x))


# ------------------------------------------------------------------- adjoints
@ti.func
def silhouette_sum_adjoint(g_a, S, power: ti.template()):
    """dL/dS = -c exp(c S) dL/dA for A = 1 - exp(c S)."""
    return -power * ti.exp(power * S) * g_a


@ti.func
def log1m_coverage_adjoint(inside, dab, dbc, dca, g_s, inv_sigma, r2):
    """The backward pass of one pair's term log(1 - D) of its pixel's S, given g_s = dL/dS:
    (dL/d(d^2), the edge that d^2 is the distance to: 0 ab, 1 bc, 2 ca).  d^2 is the nearest
    edge's (ti.min's choice: the first on ties); dlog(1 - sigmoid(x))/dx = -sigmoid(x),
    x = +-d^2 / sigma (+ inside); zero past the cutoff (outside and d^2 >= r2).  inv_sigma = 1 / sigma
    (a multiply per pair where a divide would cost several)."""
    d2 = ti.min(dab, ti.min(dbc, dca))
    sign = ti.select(inside, 1.0, -1.0)
    x = sign * d2 * inv_sigma
    q = exp_neg(ti.abs(x))
    inv = 1.0 / (1.0 + q)
    sig = ti.select(x >= 0.0, inv, q * inv)                       # sigmoid(x), stable
    gd2 = ti.select(inside | (d2 < r2), -sig * sign * inv_sigma * g_s, 0.0)
    return gd2, ti.select(dab <= ti.min(dbc, dca), 0, ti.select(dbc <= dca, 1, 2))


@ti.func
def seg_d2_grad(px, py, a, e, inv_l, g):
    """Adjoints (of the start a, of the end b = a + e; x and y) of `seg_d2_edge(px, py, a, e, inv_l)`
    times g.  With d = p - a - t e: d^2 moves with t by -2 d . e, which is 0 where t lies strictly in
    (0, 1) (d is then normal to e) and t is a constant where the clamp holds it at 0 or 1, so only the
    ends' direct part is left: d(d^2)/da = -2 (1 - t) d, d(d^2)/db = -2 t d (the step-by-step reverse of
    the clamp and of inv_l, as Taichi's autodiff forms it, adds terms in d . e, zero but for rounding)."""
    t = ti.min(ti.max(((px - a[0]) * e[0] + (py - a[1]) * e[1]) * inv_l, 0.0), 1.0)
    gd = -2.0 * g * ti.Vector([px - a[0] - t * e[0], py - a[1] - t * e[1]])
    return (1.0 - t) * gd, t * gd


@ti.func
def corner_adjoints(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca, gd2, edge_id):
    """dL/d(x, y) of the face's corners a, b, c, (ga, gb, gc), from gd2 = dL/d(d^2) of the pair at
    (px, py), through the distance to edge `edge_id` (`log1m_coverage_adjoint`).  Selects, no branches."""
    on_ab = edge_id == 0
    on_bc = edge_id == 1
    g0, g1 = seg_d2_grad(px, py, ti.select(on_ab, a, ti.select(on_bc, b, c)),
                         ti.select(on_ab, eab, ti.select(on_bc, ebc, eca)),
                         ti.select(on_ab, lab, ti.select(on_bc, lbc, lca)), gd2)
    zero = ti.Vector([0.0, 0.0])
    return ti.select(on_ab, g0, ti.select(on_bc, zero, g1)), ti.select(on_ab, g1, ti.select(on_bc, g0, zero)), \
        ti.select(on_ab, zero, ti.select(on_bc, g1, g0))


@ti.func
def take_image_grad(image: ti.template(), frame, i, j):
    """dL/dA of pixel (i, j) of silhouette frame `frame`, zeroed where it is not 0: consumed, as Taichi's
    reverse of the store `image[frame] = ...` does, so a frame rendered again in the same Tape (a
    checkpoint segment's first step repeats the previous segment's last) passes its image gradient on
    once, not twice."""
    g_a = image.grad[frame, i, j][0]
    if g_a != 0.0:            # most pixels of a small object's frame: no store
        image.grad[frame, i, j] = ti.Vector([0.0])
    return g_a
