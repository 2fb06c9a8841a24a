"""Signed distances of contact shapes: the one geometric mechanism behind every contact between objects.

Every pairing (a particle or a rigid body's contact point against a static collider, against another rigid
body, ...) asks the same question: how deep is point x inside shape k, and along which outward normal?
A shape is described in its own frame (pose = vec7 (position [m], unit quaternion x y z w), the convention of
`tigradsim.physics.rigid_pose`) by a kind and a size vec3:

    kind      size (vec3)                            signed distance d(x) of a local point x [m]
    PLANE     unused                                 x_y                (the plane y = 0 of its frame, normal +y)
    SPHERE    (radius, -, -)                         |x| - r
    BOX       (half extents hx, hy, hz)              |max(q, 0)| + min(max_i q_i, 0),  q = |x| - h
    CAPSULE   (radius, half length of the axis, -)   |x - (0, clamp(x_y, -l, l), 0)| - r   (axis along local y)
    MESH      (scale, -, -)                          s * g(x / s), g trilinear in a sampled grid of the mesh's
                                                     signed distance (`mesh_sdf_grid`)

d < 0 inside.  The outward normal n is the unit gradient of d (for the box inside: the face nearest the point).
Both are differentiable in x and in the size (so a collider's pose and size, or a body's pose, carry gradients).
The mesh grid is geometry fixed at build time; its scale is differentiable.

Mesh shapes: `mesh_sdf_grid` samples a closed, outward-oriented triangle mesh's signed distance on a regular grid
(nearest-triangle distance, sign from the generalised winding number, which is robust at edges and corners
where a ray-parity or nearest-normal sign is not).  Plain numpy at build time: a 32^3 grid of a 1,000-triangle
mesh takes about a second; no extra dependency.  Trilinear interpolation is exact for planes aligned with the
grid and within cell^2 / (8 R) of a curved surface of radius R, so choose the resolution from the features that
must touch.  Outside the grid the distance is extended by the distance to the grid box (still a lower bound on
the true distance, so no contact is ever missed there; points that far away do not touch anything).

`ShapeTable` holds the shapes of one owner (the static colliders, or the rigid bodies) in fields
`{prefix}_kind`, `{prefix}_size` (differentiable) and the mesh grids; `distance(k, x_local)` is the Taichi
function every contact term calls.  `shape_distance_np` is the same in numpy float64 (used by the build-time
interpenetration checks and by the tests as a reference).
"""

import numpy as np
import taichi as ti

from ..core.errors import as_array, check_positive
from ..core.runtime import np_float

PLANE, SPHERE, BOX, CAPSULE, MESH = 0, 1, 2, 3, 4
KIND_NAMES = {"plane": PLANE, "sphere": SPHERE, "box": BOX, "capsule": CAPSULE, "mesh": MESH}
# Below this length [m] a normal is undefined (a point at a sphere's centre, on a capsule's axis): any unit
# vector is as good, and dividing by it would put 0/0 into the adjoint.
_NORMAL_EPS = 1e-12


# -- mesh signed-distance grids (numpy, build time) ------------------------------
def _point_triangle_distance(p, a, b, c):
    """Distance [m] from points p (N, 3) to triangles (a, b, c) (each (T, 3)): (N, T).  Ericson's closest-point
    regions, vectorised."""
    p = p[:, None, :]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v_in, w_in = vb / denom, vc / denom
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
    closest = a + ab * v_in[..., None] + ac * w_in[..., None]
    regions = [
        ((d1 <= 0) & (d2 <= 0), np.broadcast_to(a, closest.shape)),
        ((d3 >= 0) & (d4 <= d3), np.broadcast_to(b, closest.shape)),
        ((d6 >= 0) & (d5 <= d6), np.broadcast_to(c, closest.shape)),
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * np.nan_to_num(t_ab)[..., None]),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * np.nan_to_num(t_ac)[..., None]),
        ((va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), b + (c - b) * np.nan_to_num(t_bc)[..., None]),
    ]
    done = np.zeros(d1.shape, dtype=bool)
    for mask, point in reversed(regions):      # the first region that applies wins, as in Ericson's order
        closest = np.where(mask[..., None], point, closest)
        done |= mask
    return np.linalg.norm(p - closest, axis=-1)


def _winding_number(p, a, b, c):
    """Generalised winding number of points p (N, 3) for a triangle soup (Jacobson et al. 2013): 1 inside a
    closed outward-oriented mesh, 0 outside (van Oosterom-Strackee solid angles)."""
    ra, rb, rc = a - p[:, None, :], b - p[:, None, :], c - p[:, None, :]
    la, lb, lc = (np.linalg.norm(r, axis=-1) for r in (ra, rb, rc))
    det = (ra * np.cross(rb, rc)).sum(-1)
    den = la * lb * lc + (ra * rb).sum(-1) * lc + (rb * rc).sum(-1) * la + (rc * ra).sum(-1) * lb
    return np.arctan2(det, den).sum(-1) / (2.0 * np.pi)


def mesh_signed_distance_np(vertices, faces, points, chunk=4096):
    """Signed distance [m] (negative inside) of points (N, 3) to a closed outward-oriented triangle mesh."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    out = np.empty(len(points))
    step = max(1, chunk * 64 // max(len(f), 1))
    for i in range(0, len(points), step):
        p = points[i:i + step]
        dist = _point_triangle_distance(p, a, b, c).min(axis=1)
        inside = _winding_number(p, a, b, c) > 0.5
        out[i:i + step] = np.where(inside, -dist, dist)
    return out


def mesh_sdf_grid(vertices, faces, resolution=32, padding=0.1):
    """Sample a closed mesh's signed distance on a regular grid around it.

    Args:
        vertices: (V, 3) [m].  faces: (F, 3) outward-oriented (counter-clockwise seen from outside).
        resolution: samples along the longest side of the padded bounding box (>= 4).
        padding: margin around the bounding box, as a fraction of its longest side.
    Returns (values (nx, ny, nz) float64 [m], origin (3,) [m], cell [m]): sample (i, j, k) lies at
    origin + cell * (i, j, k).
    """
    v = as_array("vertices", vertices, shape=(None, 3))
    if not (isinstance(resolution, (int, np.integer)) and resolution >= 4):
        raise ValueError(f"resolution: expected a whole number >= 4, got {resolution!r}")
    lo, hi = v.min(axis=0), v.max(axis=0)
    side = float((hi - lo).max())
    if not side > 0:
        raise ValueError("vertices: the mesh has no extent")
    lo, hi = lo - padding * side, hi + padding * side
    cell = float((hi - lo).max()) / (resolution - 1)
    dims = np.maximum(np.ceil((hi - lo) / cell).astype(int) + 1, 2)
    axes = [lo[i] + cell * np.arange(dims[i]) for i in range(3)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    values = mesh_signed_distance_np(v, faces, grid).reshape(tuple(dims))
    return values, lo, cell


# -- numpy reference ------------------------------------------------------------
def shape_distance_np(kind, size, x, grid=None):
    """Signed distance [m] and outward unit normal of local points x (N, 3) for one shape (numpy float64; the
    formulas of the module docstring; `grid` = (values, origin, cell) for MESH)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    size = np.asarray(size, dtype=np.float64)
    if kind == PLANE:
        d = x[:, 1].copy()
        n = np.tile([0.0, 1.0, 0.0], (len(x), 1))
    elif kind == SPHERE:
        r = np.linalg.norm(x, axis=1)
        d = r - size[0]
        n = x / np.maximum(r, _NORMAL_EPS)[:, None]
    elif kind == CAPSULE:
        p = x.copy()
        p[:, 1] -= np.clip(x[:, 1], -size[1], size[1])
        r = np.linalg.norm(p, axis=1)
        d = r - size[0]
        n = p / np.maximum(r, _NORMAL_EPS)[:, None]
    elif kind == BOX:
        q = np.abs(x) - size
        outside = np.maximum(q, 0.0)
        out_len = np.linalg.norm(outside, axis=1)
        d = out_len + np.minimum(q.max(axis=1), 0.0)
        axis = q.argmax(axis=1)
        n_in = np.zeros_like(x)
        n_in[np.arange(len(x)), axis] = np.sign(x[np.arange(len(x)), axis])
        n_out = np.sign(x) * outside / np.maximum(out_len, _NORMAL_EPS)[:, None]
        n = np.where((out_len > 0)[:, None], n_out, n_in)
    elif kind == MESH:
        values, origin, cell = grid
        s = size[0]
        d, g = _trilinear_np(values, origin, cell, x / s)
        d = d * s
        n = g / np.maximum(np.linalg.norm(g, axis=1), _NORMAL_EPS)[:, None]
    else:
        raise ValueError(f"kind: unknown shape kind {kind!r}")
    return d, n


def _trilinear_np(values, origin, cell, x):
    """Trilinear value and gradient of a sampled field at points x, extended outside the grid box by the
    distance to it (`ShapeTable._grid_distance` is the same in Taichi)."""
    dims = np.array(values.shape)
    u = (x - origin) / cell
    uc = np.clip(u, 0.0, dims - 1.0)
    i0 = np.minimum(np.floor(uc).astype(int), dims - 2)
    t = uc - i0
    d = np.zeros(len(x))
    g = np.zeros((len(x), 3))
    for corner in range(8):
        o = np.array([(corner >> 2) & 1, (corner >> 1) & 1, corner & 1])
        w = np.where(o == 1, t, 1.0 - t)
        val = values[i0[:, 0] + o[0], i0[:, 1] + o[1], i0[:, 2] + o[2]]
        d += w.prod(axis=1) * val
        for a in range(3):
            dw = np.where(o[a] == 1, 1.0, -1.0) / cell
            others = np.prod(np.delete(w, a, axis=1), axis=1)
            g[:, a] += dw * others * val
    gap = (u - uc) * cell
    gap_len = np.linalg.norm(gap, axis=1)
    outside = gap_len > 0
    d = d + gap_len
    g = np.where(outside[:, None], g + gap / np.maximum(gap_len, _NORMAL_EPS)[:, None], g)
    return d, g


# -- the table of shapes of one owner ----------------------------------------------
def check_shape(name, kind, size, mesh=None, resolution=32):
    """Validate one shape given by its user-facing name (`kind` a key of KIND_NAMES); returns (kind id,
    size (3,) float64, grid or None).  `mesh` = (vertices, faces) for "mesh"."""
    if kind not in KIND_NAMES:
        raise ValueError(f"{name}: expected a shape kind in {sorted(KIND_NAMES)}, got {kind!r}")
    k = KIND_NAMES[kind]
    size = np.atleast_1d(np.asarray(size, dtype=np.float64)) if size is not None else np.zeros(0)
    wanted = {PLANE: 0, SPHERE: 1, BOX: 3, CAPSULE: 2, MESH: 1}[k]
    if k == MESH and size.size == 0:
        size = np.ones(1)
    if size.size != wanted:
        what = {PLANE: "no size", SPHERE: "radius", BOX: "(hx, hy, hz) half extents",
                CAPSULE: "(radius, half length)", MESH: "scale"}[k]
        raise ValueError(f"{name}: a {kind} takes {what} ({wanted} number(s)), got {size.tolist()!r}")
    if wanted:
        check_positive(name, size)
    grid = None
    if k == MESH:
        if mesh is None:
            raise ValueError(f"{name}: a mesh shape needs mesh=(vertices, faces)")
        grid = mesh_sdf_grid(*mesh, resolution=resolution)
    return k, np.concatenate([size, np.zeros(3 - size.size)]), grid


def bounding_radius(kind, size, grid=None) -> float:
    """Radius [m] of a sphere about the shape's frame origin that contains it (inf for a plane)."""
    if kind == PLANE:
        return float("inf")
    if kind == SPHERE:
        return float(size[0])
    if kind == BOX:
        return float(np.linalg.norm(size))
    if kind == CAPSULE:
        return float(size[0] + size[1])
    values, origin, cell = grid
    far = origin + cell * (np.array(values.shape) - 1)
    corners = np.array([[a, b, c] for a in (origin[0], far[0]) for b in (origin[1], far[1]) for c in (origin[2], far[2])])
    return float(np.linalg.norm(corners, axis=1).max() * size[0])


@ti.data_oriented
class ShapeTable:
    """The shapes of one owner (e.g. the static colliders, or the rigid bodies), as model fields.

    Fields created by `finalize(model)` (S shapes, G grid samples over all mesh shapes):
      {prefix}_kind (S,) i32, {prefix}_size (S,) vec3 [m] (differentiable), {prefix}_bound (S,) [m]
      (bounding radius at the build's size, not differentiable; 1e30 for planes; the kernels cull with
      `cull_radius(k)`, from the current size), {prefix}_unit_bound (S,) (a mesh's bound at scale 1),
      {prefix}_grid_origin (S,) vec3,
      {prefix}_grid_cell (S,), {prefix}_grid_dims (S,) ivec3, {prefix}_grid_start (S,) i32 and
      {prefix}_grid_values (G,) (mesh grids, flattened; not differentiable).
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.kinds, self.sizes, self.grids = [], [], []

    def __len__(self):
        return len(self.kinds)

    def add(self, kind: int, size, grid=None) -> int:
        self.kinds.append(int(kind)), self.sizes.append(np.asarray(size, dtype=np.float64)), self.grids.append(grid)
        return len(self.kinds) - 1

    def bound(self, k) -> float:
        return bounding_radius(self.kinds[k], self.sizes[k], self.grids[k])

    def distance_np(self, k, x):
        """`shape_distance_np` of shape k."""
        return shape_distance_np(self.kinds[k], self.sizes[k], x, self.grids[k])

    def finalize(self, model):
        S = len(self.kinds)
        f = np_float()
        p = self.prefix
        vec3 = ti.types.vector(3, float)
        model.add_field(f"{p}_kind", ti.i32, (S,), np.array(self.kinds, np.int32), param=False)
        model.add_field(f"{p}_size", vec3, (S,), np.array(self.sizes, f))
        bounds = np.array([min(self.bound(k), 1e30) for k in range(S)], f)
        model.add_field(f"{p}_bound", float, (S,), bounds, param=False)
        # a mesh's bounding radius at scale 1, so that `bound` follows a fitted scale
        unit = [bounding_radius(k, np.ones(3), g) if k == MESH else 0.0 for k, g in zip(self.kinds, self.grids)]
        model.add_field(f"{p}_unit_bound", float, (S,), np.array(unit, f), param=False)
        origins, cells, dims, starts, values = [], [], [], [], []
        start = 0
        for grid in self.grids:
            if grid is None:
                origins.append(np.zeros(3)), cells.append(1.0), dims.append(np.ones(3, int)), starts.append(0)
                continue
            vals, origin, cell = grid
            origins.append(origin), cells.append(cell), dims.append(np.array(vals.shape)), starts.append(start)
            values.append(vals.reshape(-1))
            start += vals.size
        values = np.concatenate(values) if values else np.zeros(1)
        model.add_field(f"{p}_grid_origin", vec3, (S,), np.array(origins, f), param=False)
        model.add_field(f"{p}_grid_cell", float, (S,), np.array(cells, f), param=False)
        model.add_field(f"{p}_grid_dims", ti.types.vector(3, ti.i32), (S,), np.array(dims, np.int32), param=False)
        model.add_field(f"{p}_grid_start", ti.i32, (S,), np.array(starts, np.int32), param=False)
        model.add_field(f"{p}_grid_values", float, (len(values),), values.astype(f), param=False)
        self.model = model
        self.kind = getattr(model, f"{p}_kind")
        self.size = getattr(model, f"{p}_size")
        self.bounds = getattr(model, f"{p}_bound")
        self.unit_bounds = getattr(model, f"{p}_unit_bound")
        self.grid_origin = getattr(model, f"{p}_grid_origin")
        self.grid_cell = getattr(model, f"{p}_grid_cell")
        self.grid_dims = getattr(model, f"{p}_grid_dims")
        self.grid_start = getattr(model, f"{p}_grid_start")
        self.grid_values = getattr(model, f"{p}_grid_values")
        return self

    # -- Taichi ----------------------------------------------------------------
    @ti.func
    def _grid_value(self, k, i, j, l):
        dims = self.grid_dims[k]
        return self.grid_values[self.grid_start[k] + (i * dims[1] + j) * dims[2] + l]

    @ti.func
    def _grid_distance(self, k, x):
        """Trilinear distance (grid units of metres) and its gradient at local point x of mesh shape k
        (unscaled), extended outside the grid box by the distance to the box."""
        cell = self.grid_cell[k]
        dims = self.grid_dims[k]
        u = (x - self.grid_origin[k]) / cell
        hi = ti.Vector([ti.cast(dims[0] - 1, float), ti.cast(dims[1] - 1, float), ti.cast(dims[2] - 1, float)])
        uc = ti.min(ti.max(u, 0.0), hi)
        base = ti.Vector([ti.min(ti.cast(ti.floor(uc[a]), ti.i32), dims[a] - 2) for a in ti.static(range(3))])
        t = uc - ti.cast(base, float)
        d = 0.0
        g = ti.Vector([0.0, 0.0, 0.0], dt=float)
        for corner in ti.static(range(8)):
            o = ti.static([(corner >> 2) & 1, (corner >> 1) & 1, corner & 1])
            w = ti.Vector([t[a] if o[a] == 1 else 1.0 - t[a] for a in ti.static(range(3))])
            val = self._grid_value(k, base[0] + o[0], base[1] + o[1], base[2] + o[2])
            d += w[0] * w[1] * w[2] * val
            g += ti.Vector([(1.0 if o[0] == 1 else -1.0) * w[1] * w[2],
                            (1.0 if o[1] == 1 else -1.0) * w[0] * w[2],
                            (1.0 if o[2] == 1 else -1.0) * w[0] * w[1]]) * (val / cell)
        gap = (u - uc) * cell
        gap_len2 = gap.dot(gap)
        if gap_len2 > 0.0:
            gap_len = ti.sqrt(gap_len2)
            d += gap_len
            g += gap / gap_len
        return d, g

    @ti.func
    def cull_radius(self, k):
        """Bounding radius [m] of shape k about its frame origin at its current size (1e30 for a plane): the
        culling tests use this, not the `{prefix}_bound` of finalize, since a fit may grow the size.  One pure
        expression (no local assigned twice): it feeds comparisons only, and costs the reverse pass nothing."""
        kind = self.kind[k]
        size = self.size[k]
        return ti.select(kind == PLANE, 1e30,
                         ti.select(kind == BOX, ti.sqrt(size.dot(size)),
                                   ti.select(kind == CAPSULE, size[0] + size[1],
                                             ti.select(kind == MESH, self.unit_bounds[k] * size[0], size[0]))))

    @ti.func
    def distance(self, k, x):
        """Signed distance [m] and outward unit normal (local frame) of local point x [m] for shape k, whose kind
        is read at run time (every kind's code is compiled in; `distance_of_kind` compiles one)."""
        kind = self.kind[k]
        d = 0.0
        n = ti.Vector([0.0, 1.0, 0.0], dt=float)
        if kind == PLANE:
            d, n = self._plane(k, x)
        elif kind == SPHERE or kind == CAPSULE:
            d, n = self._round(k, x)
        elif kind == BOX:
            d, n = self._box(k, x)
        elif kind == MESH:
            d, n = self._mesh(k, x)
        return d, n

    @ti.func
    def distance_of_kind(self, k, x, kind: ti.template()):
        """`distance` for a shape k whose kind id is known when the kernel is compiled (`kind`, a Python int):
        only that kind's code is compiled, which keeps kernels that unroll many shapes (MPM's grid boundary)
        small and their reverse quick to compile."""
        fn = ti.static({PLANE: self._plane, SPHERE: self._round, CAPSULE: self._round, BOX: self._box,
                        MESH: self._mesh}[kind])
        return fn(k, x)

    @ti.func
    def _plane(self, k, x):
        return x[1], ti.Vector([0.0, 1.0, 0.0], dt=float)

    @ti.func
    def _round(self, k, x):
        """A sphere, or a capsule (a sphere's half length is 0)."""
        size = self.size[k]
        d = 0.0
        n = ti.Vector([0.0, 1.0, 0.0], dt=float)
        # the capsule's axis point as an expression: assigning p[1] into a copy of x made Taichi's reverse
        # pass load the copy before any store ("Loading variable ... before anything is stored to it")
        half = ti.select(self.kind[k] == CAPSULE, size[1], 0.0)
        p = ti.Vector([x[0], x[1] - ti.min(ti.max(x[1], -half), half), x[2]])
        r2 = p.dot(p)
        if r2 > _NORMAL_EPS * _NORMAL_EPS:
            r = ti.sqrt(r2)
            d = r - size[0]
            n = p / r
        else:
            d = -size[0]
        return d, n

    @ti.func
    def _box(self, k, x):
        size = self.size[k]
        d = 0.0
        n = ti.Vector([0.0, 1.0, 0.0], dt=float)
        q = ti.abs(x) - size
        outside = ti.max(q, 0.0)
        out2 = outside.dot(outside)
        if out2 > 0.0:
            out_len = ti.sqrt(out2)
            d = out_len
            n = ti.Vector([ti.math.sign(x[a]) for a in ti.static(range(3))]) * outside / out_len
        else:
            # inside: the nearest face (largest q); ties go to the lower axis, as numpy's argmax
            if q[0] >= q[1] and q[0] >= q[2]:
                d = q[0]
                n = ti.Vector([ti.math.sign(x[0]), 0.0, 0.0])
            elif q[1] >= q[2]:
                d = q[1]
                n = ti.Vector([0.0, ti.math.sign(x[1]), 0.0])
            else:
                d = q[2]
                n = ti.Vector([0.0, 0.0, ti.math.sign(x[2])])
        return d, n

    @ti.func
    def _mesh(self, k, x):
        s = self.size[k][0]
        n = ti.Vector([0.0, 1.0, 0.0], dt=float)
        g0, grad = self._grid_distance(k, x / s)
        glen = ti.sqrt(grad.dot(grad))
        if glen > _NORMAL_EPS:
            n = grad / glen
        return g0 * s, n
