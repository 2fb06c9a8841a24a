"""Pixel lanes stage: silhouettes on CPUs without a pair list.

After the `Binner`'s tile lists, `bin_lanes` walks each tile's sorted faces and, for each, the rows of the
tile its box reaches in groups of `lane_count` pixels, branch-free, in stages that end in stores of their
lanes (so that LLVM packs them into SIMD), summing S = sum log(1 - D) per pixel in the same face order as
the pair list (coverage.py's product form with `exp_neg`); the backward (`silhouette_grad_lanes`) walks
the same tiles (dL/dS per pixel, each face's corner adjoints summed over its tile, the tiles' sums
scattered in list order).  A kept frame keeps only its per-pixel S: the backward kernel projects the
frame and bins its tile lists again itself, as `bin_lanes` projects, bins and composites, so a frame is
one launch forward and two backward (with `Shader.prepare.grad`).  Same images and gradients as the pair
list to round-off (`tests/test_render_reference.py`).
"""
import taichi as ti

from .coverage import (corner_adjoints, edge_d2s, edge_lines, face_edges, log1m_coverage_adjoint,
                       log1m_coverage_step, silhouette_sum, silhouette_sum_adjoint, take_image_grad, tri_inside)


@ti.data_oriented
class PixelLanes:
    """Fields, per tile: its pixels' running sums (lane_log: the log part, lane_prod: the product part) and
    dL/dS (lane_gs) by (tile, row, group of lane_count columns)[lane], the per-lane adjoint sums of one
    face's six corner coordinates (lane_grad) and two groups' stage results (lane_tmp); a single entry
    each when the pair list is used (lane_count 0).  Writes `image` and the `KeptFrames`' kept_log."""

    def __init__(self, projector, shader, binner, kept, image, lane_count, lanes_serial, serial, min_lanes):
        fl = float
        self.projector, self.shader, self.binner, self.kept, self.image = projector, shader, binner, kept, image
        self.width, self.height = projector.width, projector.height
        self.lane_count = lane_count
        self.lanes_serial, self.serial = lanes_serial, serial
        self.coverage_power = shader.coverage_power
        L = lane_count or min_lanes
        nt, ts = (binner.tiles_x * binner.tiles_y, binner.tile_size) if lane_count else (1, L)
        lanes = ti.types.vector(L, fl)
        self.lane_log = lanes.field(shape=(nt, ts + 1, ts // L))    # row ts: see `bin_lanes`
        self.lane_prod = lanes.field(shape=(nt, ts + 1, ts // L))
        self.lane_gs = lanes.field(shape=(nt, ts, ts // L))
        self.lane_grad = lanes.field(shape=(nt, 6))
        self.lane_tmp = lanes.field(shape=(nt, 12))   # two groups' stage results (`bin_lanes`: two rows at a time)

    @ti.func
    def box_span(self, f, tx, ty):
        """The part of tile (tx, ty) that face f's box (fbox) reaches, rounded as `Binner.bin_faces` rounds
        it: (first row, last row, first lane group, last lane group) within the tile; empty when a
        last is below its first."""
        TS, W, H, L = ti.static(self.binner.tile_size, self.width, self.height, self.lane_count)
        c0f, c1f, r0f, r1f = self.binner.box_pixels(self.binner.fbox[f])
        r0 = ti.cast(ti.min(ti.max(r0f, 0.0), H * 1.0), ti.i32) - ty * TS
        r1 = ti.cast(ti.max(ti.min(r1f, H - 1.0), -1.0), ti.i32) - ty * TS
        c0 = ti.cast(ti.min(ti.max(c0f, 0.0), W * 1.0), ti.i32) - tx * TS
        c1 = ti.cast(ti.max(ti.min(c1f, W - 1.0), -1.0), ti.i32) - tx * TS
        return ti.max(r0, 0), ti.min(r1, TS - 1), ti.max(c0, 0) // L, ti.min(c1, TS - 1) // L

    @ti.func
    def tile_face(self, f):
        """Face f's projected corners a, b, c and its `face_edges`."""
        a, b, c = self.projector.corners(f)
        eab, lab, ebc, lbc, eca, lca = face_edges(a, b, c)
        return a, b, c, eab, lab, ebc, lbc, eca, lca

    @ti.func
    def beyond_edges(self, i, j0, n0, o0, n1, o1, n2, o2, r_far):
        """Whether all of lane group (i, j0 .. j0 + lane_count - 1) lies more than r_far beyond one edge
        line of the face (`edge_lines`): then no pixel of it is inside the face or within the cutoff,
        and the group adds exactly nothing (in the box's corners: ~20 % of the groups of bench_batch's
        atlas).  The distance is linear along the row, so its least value is at an end of the group."""
        xa, y = self.projector.pixel_ndc(i, j0)
        xb, _ = self.projector.pixel_ndc(i, j0 + ti.static(self.lane_count - 1))
        return (ti.min(n0[0] * xa, n0[0] * xb) + n0[1] * y - o0 > r_far) | \
            (ti.min(n1[0] * xa, n1[0] * xb) + n1[1] * y - o1 > r_far) | \
            (ti.min(n2[0] * xa, n2[0] * xb) + n2[1] * y - o2 > r_far)

    @ti.func
    def lane_distances(self, t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, o: ti.template() = 0):
        """The first stage of a lane group (pixels (i, j0 .. j0 + lane_count - 1)) of tile t: the
        squared distances to the face's edges ab, bc, ca and whether inside (1.0 / 0.0), into
        lane_tmp[t, o .. o + 3]."""
        for l in ti.static(range(self.lane_count)):
            px, py = self.projector.pixel_ndc(i, j0 + l)
            dab, dbc, dca = edge_d2s(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca)
            self.lane_tmp[t, o + 0][l] = dab
            self.lane_tmp[t, o + 1][l] = dbc
            self.lane_tmp[t, o + 2][l] = dca
            self.lane_tmp[t, o + 3][l] = ti.select(tri_inside(a, b, c, px, py), 1.0, 0.0)

    @ti.func
    def lane_terms(self, t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, inv_sigma, r2, o: ti.template()):
        """The stages of a lane group (pixels (i, j0 .. j0 + lane_count - 1)) of tile t up to its terms, into
        lane_tmp[t, o .. o + 5]: `lane_distances`, then x = d^2 / sigma (d^2 the nearest edge's) and whether
        the pair is within the cutoff (inside or d^2 < r2; 1.0 / 0.0).  In stages, each ending in stores of
        its lanes: LLVM's SLP vectorizer packs a tree of at most 12 levels into SIMD, and one pixel's formula
        is deeper."""
        self.lane_distances(t, i, j0, a, b, c, eab, lab, ebc, lbc, eca, lca, o)
        for l in ti.static(range(self.lane_count)):
            d2 = ti.min(self.lane_tmp[t, o][l], ti.min(self.lane_tmp[t, o + 1][l], self.lane_tmp[t, o + 2][l]))
            self.lane_tmp[t, o + 4][l] = d2 * inv_sigma
            self.lane_tmp[t, o + 5][l] = ti.select((self.lane_tmp[t, o + 3][l] > 0.0) | (d2 < r2), 1.0, 0.0)

    @ti.func
    def lane_accumulate(self, t, r, g, o: ti.template()):
        """Add the terms in lane_tmp[t, o .. o + 5] (`lane_terms`) to the sums of lane group (r, g) of tile t
        (coverage.py's `log1m_coverage_step`: the log part into lane_log, the factor into lane_prod)."""
        for l in ti.static(range(self.lane_count)):
            lg, pr = log1m_coverage_step(self.lane_log[t, r, g][l], self.lane_prod[t, r, g][l],
                                         self.lane_tmp[t, o + 4][l], self.lane_tmp[t, o + 3][l],
                                         self.lane_tmp[t, o + 5][l], True)
            self.lane_log[t, r, g][l] = lg
            self.lane_prod[t, r, g][l] = pr

    @ti.kernel
    def bin_lanes(self, verts: ti.template(), slot: ti.i32, tile_faces: ti.template(), r2: float, sigma: float,
                  frame: ti.i32):
        """The silhouette's binning in pixel lanes: verts[slot] projected (`Shader.project_and_shade`) and
        its faces binned into tiles (`Binner.bin_faces`), then per tile, in parallel, its faces in list
        order and, for each, the part of the tile its box reaches, two rows at a time in groups of
        lane_count pixels: branch-free arithmetic ending in stores to consecutive addresses, which LLVM
        packs into SIMD.  Each pixel's S lands in kept_log (`KeptFrames.sum_slot`) and its value A in
        image[frame]: the frame is composited here, in the tile's own iteration."""
        TS, TX, W, H, L = ti.static(self.binner.tile_size, self.binner.tiles_x, self.width, self.height,
                                    self.lane_count)
        cap = ti.static(tile_faces.shape[1])
        self.shader.project_and_shade(verts, slot)
        self.binner.bin_faces(tile_faces, r2)
        ti.loop_config(serialize=self.lanes_serial)
        for t in range(self.binner.tiles_x * self.binner.tiles_y):
            ty = t // TX
            tx = t % TX
            inv_sigma = 1.0 / sigma
            r_far = ti.sqrt(r2) * 1.001 + 1e-6      # past the cutoff with room for rounding in either precision
            empty = self.binner.tile_count[t] == 0      # most tiles of a small object's frame: no scratch, no log
            # element by element, as every other access to these fields (Taichi 1.7.4 forwarded a
            # whole-vector store past later element stores in the same loop: stale sums, measured)
            if not empty:
                for r, g in ti.ndrange(TS + 1, TS // L):
                    for l in ti.static(range(L)):
                        self.lane_log[t, r, g][l] = 0.0
                        self.lane_prod[t, r, g][l] = 1.0
            for k in range(ti.min(self.binner.tile_count[t], cap)):
                a, b, c, eab, lab, ebc, lbc, eca, lca = self.tile_face(tile_faces[t, k])
                n0, o0, n1, o1, n2, o2 = edge_lines(a, b, c, eab, lab, ebc, lbc, eca, lca)
                r0, r1, g0, g1 = self.box_span(tile_faces[t, k], tx, ty)
                # two rows at a time: their groups' arithmetic is independent, and the CPU overlaps the two
                # chains of dependent multiplies and adds (Taichi 1.7's CPU code fuses none into FMAs;
                # benchmarks/MEASURED.md).  A pair is skipped where both groups lie beyond an edge line; one
                # that lies beyond adds exact zeros (mask 0), so every pixel's sums, in face order, are the
                # bits of one row at a time.
                for rp in range((r1 - r0 + 2) // 2):
                    r = r0 + 2 * rp
                    # an odd row count's last row is paired with the scratch row TS (zeroed with the others,
                    # never read)
                    rb = ti.select(r + 1 <= r1, r + 1, TS)
                    for g in range(g0, g1 + 1):
                        if self.beyond_edges(ty * TS + r, tx * TS + g * L, n0, o0, n1, o1, n2, o2, r_far) and \
                                ((rb == TS) | self.beyond_edges(ty * TS + r + 1, tx * TS + g * L, n0, o0, n1, o1, n2,
                                                                o2, r_far)):
                            continue
                        self.lane_terms(t, ty * TS + r, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                        inv_sigma, r2, 0)
                        self.lane_terms(t, ty * TS + r + 1, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                        inv_sigma, r2, 6)
                        self.lane_accumulate(t, r, g, 0)
                        self.lane_accumulate(t, rb, g, 6)
            sums = self.kept.sum_slot(frame)
            for r, g in ti.ndrange(TS, TS // L):
                for l in ti.static(range(L)):
                    if ty * TS + r < H and tx * TS + g * L + l < W:
                        S = 0.0                  # an empty tile: S = 0, so A = 0 (`Shader.pixel_value`: no exp)
                        if not empty:
                            S = silhouette_sum(self.lane_log[t, r, g][l], self.lane_prod[t, r, g][l])
                        self.kept.kept_log[sums, ty * TS + r, tx * TS + g * L + l] = S
                        self.image[frame, ty * TS + r, tx * TS + g * L + l] = self.shader.pixel_value(
                            ty * TS + r, tx * TS + g * L + l, S, 0.0, ti.Vector([0.0, 0.0, 0.0]), 0.0, 0.0)

    @ti.func
    def sum_grad(self, frame, i, j):
        """dL/dS of pixel (i, j) of the frame (its image gradient consumed), S from kept_log."""
        g_a = take_image_grad(self.image, frame, i, j)
        g_s = 0.0
        if g_a != 0.0:            # most pixels of a small object's frame: no exp
            g_s = silhouette_sum_adjoint(g_a, self.kept.kept_log[self.kept.sum_slot(frame), i, j],
                                         ti.static(self.coverage_power))
        return g_s

    @ti.kernel
    def silhouette_grad_lanes(self, verts: ti.template(), slot: ti.i32, tile_faces: ti.template(), frame: ti.i32,
                              sigma: float, r2: float):
        """`PairList.silhouette_grad` in pixel lanes (after `bin_lanes`): per tile, in parallel, first its
        pixels' dL/dS, in (tile, row, group)[lane] layout (0 off the image), then per face of its list the
        corner adjoints of the face's pairs (coverage.py: zero past the cutoff) summed over the groups its
        box reaches, lanes apart, then over the lanes, into the tile's own tile_grad entry; these added into
        proj.grad tile by tile in list order (serially when deterministic).  It first projects verts[slot]
        again, bins the tile lists again and zeroes the scratch gradients."""
        TS, TX, W, H, L = ti.static(self.binner.tile_size, self.binner.tiles_x, self.width, self.height,
                                    self.lane_count)
        cap = ti.static(tile_faces.shape[1])
        tile_grad, proj, faces = ti.static(self.binner.tile_grad, self.projector.proj, self.projector.faces)
        # the projection and the tile lists of the frame (a kept frame's were overwritten by the frames
        # rendered after it; both are deterministic, so they are the forward's), and the scratch gradients
        # zeroed: in this launch, not in launches of their own
        self.shader.project_and_shade(verts, slot)
        self.binner.bin_faces(tile_faces, r2)
        self.projector.zero_grads()
        self.shader.zero_grads()
        self.projector.zero_camera_grads()
        ti.loop_config(serialize=self.lanes_serial)
        for t in range(self.binner.tiles_x * self.binner.tiles_y):
            ty = t // TX
            tx = t % TX
            inv_sigma = 1.0 / sigma
            r_far = ti.sqrt(r2) * 1.001 + 1e-6      # as in `bin_lanes`
            # the tile's dL/dS first, while its pixels are in cache (every tile's: the image gradient
            # is consumed everywhere; a tile with no face passes it on to nothing)
            if self.binner.tile_count[t] == 0:
                for r, g in ti.ndrange(TS, TS // L):
                    for l in ti.static(range(L)):
                        if ty * TS + r < H and tx * TS + g * L + l < W:
                            take_image_grad(self.image, frame, ty * TS + r, tx * TS + g * L + l)
            else:
                for r, g in ti.ndrange(TS, TS // L):
                    for l in ti.static(range(L)):
                        g_s = 0.0
                        if ty * TS + r < H and tx * TS + g * L + l < W:
                            g_s = self.sum_grad(frame, ty * TS + r, tx * TS + g * L + l)
                        self.lane_gs[t, r, g][l] = g_s
            for k in range(ti.min(self.binner.tile_count[t], cap)):
                a, b, c, eab, lab, ebc, lbc, eca, lca = self.tile_face(tile_faces[t, k])
                n0, o0, n1, o1, n2, o2 = edge_lines(a, b, c, eab, lab, ebc, lbc, eca, lca)
                for q in ti.static(range(6)):
                    for l in ti.static(range(L)):       # element by element (`bin_lanes`)
                        self.lane_grad[t, q][l] = 0.0
                r0, r1, g0, g1 = self.box_span(tile_faces[t, k], tx, ty)
                for r in range(r0, r1 + 1):
                    for g in range(g0, g1 + 1):
                        # a group whose pixels all have dL/dS = 0 (no face within the cutoff there and
                        # the target 0, or a loss that ignores them), or that lies past one of the face's
                        # edges by more than the cutoff (`beyond_edges`), adds nothing: skipped
                        any_gs = False
                        for l in ti.static(range(L)):
                            any_gs |= self.lane_gs[t, r, g][l] != 0.0
                        if any_gs and not self.beyond_edges(ty * TS + r, tx * TS + g * L, n0, o0, n1, o1, n2, o2,
                                                            r_far):
                            # in stages ending in stores of their lanes, as in `bin_lanes`
                            self.lane_distances(t, ty * TS + r, tx * TS + g * L, a, b, c, eab, lab, ebc, lbc, eca, lca)
                            live = False
                            for l in ti.static(range(L)):
                                gd2, edge = log1m_coverage_adjoint(self.lane_tmp[t, 3][l] > 0.0,
                                                                   self.lane_tmp[t, 0][l], self.lane_tmp[t, 1][l],
                                                                   self.lane_tmp[t, 2][l], self.lane_gs[t, r, g][l],
                                                                   inv_sigma, r2)
                                self.lane_tmp[t, 4][l] = gd2
                                self.lane_tmp[t, 5][l] = ti.cast(edge, float)
                                live |= gd2 != 0.0
                            if live:                     # groups with no pair within the cutoff: skipped
                                for l in ti.static(range(L)):
                                    px, py = self.projector.pixel_ndc(ty * TS + r, tx * TS + g * L + l)
                                    ga, gb, gc = corner_adjoints(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca,
                                                                 self.lane_tmp[t, 4][l],
                                                                 ti.cast(self.lane_tmp[t, 5][l], ti.i32))
                                    gl = ti.Vector([ga[0], ga[1], gb[0], gb[1], gc[0], gc[1]])
                                    for q in ti.static(range(6)):
                                        self.lane_grad[t, q][l] = self.lane_grad[t, q][l] + gl[q]
                g_sum = ti.Vector([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
                for q in ti.static(range(6)):
                    for l in ti.static(range(L)):
                        g_sum[q] += self.lane_grad[t, q][l]
                tile_grad[t, k] = g_sum
        ti.loop_config(serialize=self.serial)
        for t in range(self.binner.tiles_x * self.binner.tiles_y):
            for k in range(ti.min(self.binner.tile_count[t], cap)):
                idx = faces[tile_faces[t, k]]
                g = tile_grad[t, k]
                for q in ti.static(range(3)):
                    proj.grad[idx[q]] += ti.Vector([g[2 * q], g[2 * q + 1], 0.0])
