"""Pair compositing stage: the frame as a list of (pixel, face) pairs, pixel-major.

1. `bin` (no gradient): after the `Binner`'s tile lists, per pixel the exact cutoff test over its
   tile's faces (after a bounding-box pre-test): count the survivors and their maximum depth logit
   (stable softmax; its gradient cancels exactly), remember them as bits over the tile list, prefix-sum
   the counts and write the compact pair list.  Memory is O(pairs), i.e. O(pixels x faces near a pixel),
   never O(pixels x faces).  Silhouettes sum S = sum log(1 - D) right there (coverage.py's product form).
2. `composite` (forward): per pixel, in parallel, a loop over its own contiguous range of pairs sums
   log(1 - D), the softmax weights and the weighted colours in a fixed order and forms the pixel.
3. Backward: colour's `accumulate.grad`, the reverse of a flat loop over the pairs that `+=` into
   per-pixel sums followed by a per-pixel loop forming the image (the structure Taichi differentiates
   correctly, DESIGN.md rule 4); silhouettes' `silhouette_grad`, written out (coverage.py's adjoints).
"""
import taichi as ti

from tigradsim.core.runtime import serial_loop

from .coverage import (coverage_logit, corner_adjoints, edge_d2s, face_edges, log1m_coverage,
                       log1m_coverage_adjoint, log1m_coverage_step, silhouette_sum, silhouette_sum_adjoint,
                       softmax_weight, take_image_grad, tri_inside)


@ti.data_oriented
class PairList:
    """Fields: pairs (capacity,) of (pixel, face) and pair_grad (silhouettes: each pair's adjoints of its
    face's corners), re-allocated with the capacity; per pixel: pix_count, pix_offset (its range of
    pairs), acc_log (S), acc_w, acc_c (the softmax sums), zmax; row_sum (the prefix sum's rows).
    Reads the other stages' fields, writes `image`."""

    def __init__(self, projector, shader, binner, kept, image, channels, binning, z_init, pixel_lanes, serial):
        fl = float
        self.projector, self.shader, self.binner, self.kept, self.image = projector, shader, binner, kept, image
        H, W = projector.height, projector.width
        self.width, self.height, self.face_count = W, H, projector.face_count
        self.channels, self.binning, self.z_init, self.serial = channels, binning, z_init, serial
        self.shading = shader.shading
        self.coverage_power = shader.coverage_power
        self.keep_frames = kept.keep_frames
        # per-pixel sums; their gradients only where a backward pass reads them: colour's
        # (`accumulate.grad`), the silhouette pair list's acc_log (`silhouette_grad`); pixel lanes
        # sum into kept_log (lanes.py) and keep dL/dS in their own lanes
        colour = channels != 1
        self.acc_log = ti.field(fl, shape=(1, 1) if pixel_lanes else (H, W), needs_grad=colour or not pixel_lanes)
        self.acc_w = ti.field(fl, shape=(H, W), needs_grad=colour)
        self.acc_c = ti.Vector.field(3, fl, shape=(H, W), needs_grad=colour)
        self.zmax = ti.field(fl, shape=(H, W))
        self.pix_count = ti.field(ti.i32, shape=H * W)
        self.pix_offset = ti.field(ti.i32, shape=H * W)
        self.row_sum = ti.field(ti.i32, shape=H)
        self._tree = None
        self.capacity = 0
        self.alloc(max(1024, 4 * H * W))

    def alloc(self, cap):
        """Room for `cap` pairs (the list is rewritten by the next `bin`)."""
        if self._tree is not None:
            self._tree.destroy()
        fb = ti.FieldsBuilder()
        self.pairs = ti.Vector.field(2, ti.i32)
        fb.dense(ti.i, cap).place(self.pairs)
        # silhouettes: each pair's adjoint of its face's projected corners (x, y of a, b, c),
        # written by threads into the pair's own row (`silhouette_grad`)
        self.pair_grad = ti.Vector.field(6, float)
        fb.dense(ti.i, cap if self.channels == 1 else 1).place(self.pair_grad)
        self._tree = fb.finalize()
        self.capacity = cap

    @ti.func
    def hit(self, f, px, py, r2):
        """(does pair (pixel, f) pass the cutoff: inside or d^2 < r2, its depth logit z).
        A silhouette needs no depth (z = 0) and d^2 only outside the face."""
        hit = False
        z = 0.0
        if ti.static(self.channels == 1):
            hit = self.projector.face_inside(f, px, py)
            if not hit:
                hit = self.projector.face_d2(f, px, py) < r2
        else:
            inside, d2, bc, zf = self.projector.face_geom(f, px, py)
            hit = inside or d2 < r2
            z = zf
        return hit, z

    @ti.kernel
    def bin(self, tile_faces: ti.template(), pix_mask: ti.template(), pairs: ti.template(), r2: float,
            sigma: float, clear_grads: ti.template()):
        """Step 1 of the module docstring (with the `Binner`'s tile lists; clear_grads: also zero the
        scratch gradients, for a backward pass's re-render)."""
        TS = ti.static(self.binner.tile_size)
        TX = ti.static(self.binner.tiles_x)
        W = ti.static(self.width)
        H = ti.static(self.height)
        cap = ti.static(tile_faces.shape[1])
        pcap = ti.static(pairs.shape[0])
        # clear accumulators.  Bookkeeping loops like these run on one thread when small
        # (`runtime.serial_loop`: a parallel loop's dispatch costs more than a 64x64 frame's copy)
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i, j in ti.ndrange(H, W):
            self.acc_log[i, j] = 0.0
            self.acc_w[i, j] = 0.0
            self.acc_c[i, j] = ti.Vector([0.0, 0.0, 0.0])
            self.zmax[i, j] = self.z_init
        if ti.static(clear_grads):
            self.zero_scratch_grads()
        if ti.static(self.binning):
            self.binner.bin_faces(tile_faces, r2)
        # per pixel: exact cutoff test, count and maximum depth logit; in binning mode the
        # survivors are remembered as bits over the tile list
        for i, j in self.zmax:
            px, py = self.projector.pixel_ndc(i, j)
            t = (i // TS) * TX + j // TS
            n = self.face_count
            if ti.static(self.binning):
                n = ti.min(self.binner.tile_count[t], cap)
            cnt = 0
            zm = self.z_init
            slog = 0.0
            sprod = 1.0
            word = 0
            for k in range(n):
                f = k
                ok = True
                if ti.static(self.binning):
                    f = tile_faces[t, k]
                    bb = self.binner.fbox[f]      # cheap rejection before the exact test
                    ok = (px >= bb[0]) & (px <= bb[1]) & (py >= bb[2]) & (py <= bb[3])
                else:
                    ok = self.projector.face_ok(f)
                if ok:
                    if ti.static(self.channels == 1):
                        # silhouette: the pair's term of S right here (the order of the pair list),
                        # so `composite` has no pair loop
                        inside = self.projector.face_inside(f, px, py)
                        d2 = self.projector.face_d2(f, px, py)
                        if inside or d2 < r2:
                            cnt += 1
                            word |= 1 << (k & 31)
                            x = d2 * (1.0 / sigma)      # as in lanes.py
                            slog, sprod = log1m_coverage_step(slog, sprod, x, ti.select(inside, 1.0, 0.0), 1.0,
                                                              False)
                    else:
                        hit, z = self.hit(f, px, py, r2)
                        if hit:
                            cnt += 1
                            word |= 1 << (k & 31)
                            zm = ti.max(zm, z)
                if ti.static(self.binning):
                    if (k & 31) == 31 or k == n - 1:
                        pix_mask[i * W + j, k >> 5] = word
                        word = 0
            self.pix_count[i * W + j] = cnt
            self.zmax[i, j] = zm
            if ti.static(self.channels == 1):
                self.acc_log[i, j] = silhouette_sum(slog, sprod)
        # exclusive prefix sum of the counts: rows in parallel, then the row
        # totals serially (H steps), then the offsets within each row
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i in range(H):
            acc = 0
            for j in range(W):
                acc += self.pix_count[i * W + j]
            self.row_sum[i] = acc
        ti.loop_config(serialize=True)        # one iteration: no thread-pool dispatch
        for _ in range(1):
            acc = 0
            for i in range(H):
                cnt = self.row_sum[i]
                self.row_sum[i] = acc
                acc += cnt
            self.binner.counters[0] = acc
        ti.loop_config(serialize=ti.static(serial_loop(W * H)))
        for i in range(H):
            acc = self.row_sum[i]
            for j in range(W):
                self.pix_offset[i * W + j] = acc
                acc += self.pix_count[i * W + j]
        # write the (pixel, face) pairs
        ti.loop_config(serialize=ti.static(serial_loop(W * H, 8)))
        for i, j in ti.ndrange(H, W):
            t = (i // TS) * TX + j // TS
            off = self.pix_offset[i * W + j]
            if ti.static(self.binning):
                n = ti.min(self.binner.tile_count[t], cap)
                for k in range(n):
                    if (pix_mask[i * W + j, k >> 5] >> (k & 31)) & 1:
                        if off < pcap:
                            pairs[off] = ti.Vector([i * W + j, tile_faces[t, k]])
                        off += 1
            else:
                px, py = self.projector.pixel_ndc(i, j)
                for f in range(self.face_count):
                    if self.projector.face_ok(f):
                        hit, z = self.hit(f, px, py, r2)
                        if hit:
                            if off < pcap:
                                pairs[off] = ti.Vector([i * W + j, f])
                            off += 1

    @ti.kernel
    def composite(self, pairs: ti.template(), kept_pairs: ti.template(), frame: ti.i32, n_pairs: ti.i32,
                  sigma: float, gamma: float):
        """Forward: per pixel, its own pairs (contiguous, pixel-major) summed in list order, so the sums do
        not depend on threads.  Not differentiated (the inner loop carries sums: DESIGN.md rule 4);
        `accumulate` is its differentiable twin.  With keep_frames the pairs and sums are also kept in
        slot `frame` (`restore`)."""
        W = ti.static(self.width)
        if ti.static(self.keep_frames):
            ti.loop_config(serialize=ti.static(serial_loop(pairs.shape[0])))
            for e in range(n_pairs):
                kept_pairs[frame, e] = pairs[e]
        # silhouettes: a few operations per pixel (`bin` summed the pairs)
        ti.loop_config(serialize=ti.static(self.shading == "silhouette" and serial_loop(self.width * self.height, 8)))
        for p in range(self.width * self.height):
            i = p // W
            j = p % W
            px, py = self.projector.pixel_ndc(i, j)
            zm = self.zmax[i, j]
            off = self.pix_offset[p]
            slog = 0.0
            sw = 0.0
            sc = ti.Vector([0.0, 0.0, 0.0])
            if ti.static(self.shading == "silhouette"):
                slog = self.acc_log[i, j]          # summed by `bin`
            else:
                for e in range(off, off + self.pix_count[p]):
                    f = pairs[e][1]
                    inside, d2, bc, z = self.projector.face_geom(f, px, py)
                    x = ti.select(inside, d2, -d2) / sigma
                    slog += log1m_coverage(x)
                    wgt = softmax_weight(x, z, zm, gamma)
                    sw += wgt
                    sc += wgt * self.shader.shaded(f, bc)
            if ti.static(self.shading != "silhouette"):      # a silhouette's acc_log is its sum already
                self.acc_log[i, j] = slog
                self.acc_w[i, j] = sw
                self.acc_c[i, j] = sc
            self.image[frame, i, j] = self.shader.pixel_value(i, j, slog, sw, sc, zm, gamma)
            if ti.static(self.keep_frames):
                self.kept.kept_log[frame, i, j] = slog
                if ti.static(self.channels != 1):
                    self.kept.kept_w[frame, i, j] = sw
                    self.kept.kept_c[frame, i, j] = sc
                    self.kept.kept_z[frame, i, j] = zm

    @ti.kernel
    def accumulate(self, pairs: ti.template(), n_pairs: ti.i32, frame: ti.i32, sigma: float, gamma: float):
        """Differentiable twin of `composite` (only its `.grad` runs; it reads the sums `composite` left in
        acc_*): a flat loop over the pairs that only `+=` into per-pixel sums, then the per-pixel image.
        Serial when deterministic: the reverse pair loop adds vertex, colour and light adjoints, the
        reverse pixel loop the background's, into shared locations.  Colour shadings only."""
        W = ti.static(self.width)
        ti.loop_config(serialize=self.serial)
        for e in range(n_pairs):
            pr = pairs[e]
            i = pr[0] // W
            j = pr[0] % W
            f = pr[1]
            px, py = self.projector.pixel_ndc(i, j)
            inside, d2, bc, z = self.projector.face_geom(f, px, py)
            x = ti.select(inside, d2, -d2) / sigma
            self.acc_log[i, j] += log1m_coverage(x)
            if ti.static(self.shading != "silhouette"):
                wgt = softmax_weight(x, z, self.zmax[i, j], gamma)
                col = self.shader.shaded(f, bc)
                self.acc_w[i, j] += wgt
                self.acc_c[i, j] += wgt * col
        ti.loop_config(serialize=self.serial)
        for p in range(self.width * self.height):
            i = p // W
            j = p % W
            self.image[frame, i, j] = self.shader.pixel_value(i, j, self.acc_log[i, j], self.acc_w[i, j],
                                                              self.acc_c[i, j], self.zmax[i, j], gamma)

    @ti.kernel
    def silhouette_grad(self, pairs: ti.template(), pair_grad: ti.template(), n_pairs: ti.i32, frame: ti.i32,
                        sigma: float, r2: float):
        """The backward pass of a silhouette frame, written out (its forward is `bin`'s S(p) and
        A = 1 - exp(c S)): adds dL/d(NDC x, y) of every face corner into proj.grad.

        1. per pixel: dL/dS = -c exp(c S) dL/dA (into acc_log.grad; dL/dA is then zeroed);
        2. per pair, on threads: dL/dS dlog(1 - D)/d(d^2) d(d^2)/d(corners) (coverage.py), into the pair's
           own row of pair_grad (no shared writes);
        3. the rows added into the corners' proj.grad in pair order (serially when deterministic: the same
           sums, bit for bit, on every run).
        """
        W = ti.static(self.width)
        proj, faces = ti.static(self.projector.proj, self.projector.faces)
        ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height, 8)))
        for i, j in ti.ndrange(self.height, self.width):
            g_a = take_image_grad(self.image, frame, i, j)
            g_s = 0.0
            if g_a != 0.0:            # most pixels of a small object's frame: no exp
                g_s = silhouette_sum_adjoint(g_a, self.acc_log[i, j], ti.static(self.coverage_power))
            self.acc_log.grad[i, j] = g_s
        for e in range(n_pairs):
            pr = pairs[e]
            i = pr[0] // W
            j = pr[0] % W
            idx = faces[pr[1]]
            px, py = self.projector.pixel_ndc(i, j)
            a = proj[idx[0]]
            b = proj[idx[1]]
            c = proj[idx[2]]
            eab, lab, ebc, lbc, eca, lca = face_edges(a, b, c)
            dab, dbc, dca = edge_d2s(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca)
            gd2, edge = log1m_coverage_adjoint(tri_inside(a, b, c, px, py), dab, dbc, dca, self.acc_log.grad[i, j],
                                               1.0 / sigma, r2)
            ga, gb, gc = corner_adjoints(px, py, a, b, c, eab, lab, ebc, lbc, eca, lca, gd2, edge)
            out = ti.Vector([ga[0], ga[1], gb[0], gb[1], gc[0], gc[1]])
            pair_grad[e] = out
        ti.loop_config(serialize=self.serial)
        for e in range(n_pairs):
            idx = faces[pairs[e][1]]
            g = pair_grad[e]
            for k in ti.static(range(3)):
                proj.grad[idx[k]] += ti.Vector([g[2 * k], g[2 * k + 1], 0.0])

    @ti.kernel
    def restore(self, kept_pairs: ti.template(), pairs: ti.template(), frame: ti.i32, n_pairs: ti.i32):
        """The scratch buffers as `bin` + `composite` left them for kept frame `frame` (its pairs, per-pixel
        sums and zmax; what `accumulate.grad` reads), and the scratch gradients zeroed."""
        ti.loop_config(serialize=ti.static(serial_loop(pairs.shape[0])))
        for e in range(n_pairs):
            pairs[e] = kept_pairs[frame, e]
        ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height)))
        for i, j in ti.ndrange(self.height, self.width):
            self.acc_log[i, j] = self.kept.kept_log[frame, i, j]
            if ti.static(self.channels != 1):
                self.acc_w[i, j] = self.kept.kept_w[frame, i, j]
                self.acc_c[i, j] = self.kept.kept_c[frame, i, j]
                self.zmax[i, j] = self.kept.kept_z[frame, i, j]
        self.zero_scratch_grads()

    @ti.kernel
    def clear_scratch_grads(self):
        self.zero_scratch_grads()

    @ti.func
    def zero_scratch_grads(self):
        """Zero the gradients of the per-frame scratch fields of every stage (they are reused by every
        frame).  A silhouette's per-pixel sums need none: its backward sets every pixel's dL/dS first."""
        if ti.static(self.channels != 1):
            ti.loop_config(serialize=ti.static(serial_loop(self.width * self.height)))
            for i, j in ti.ndrange(self.height, self.width):
                self.acc_log.grad[i, j] = 0.0
                self.acc_w.grad[i, j] = 0.0
                self.acc_c.grad[i, j] = ti.Vector([0.0, 0.0, 0.0])
        self.projector.zero_grads()
        self.shader.zero_grads()
        self.projector.zero_camera_grads()
