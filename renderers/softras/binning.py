"""Binning stage: each face into the tiles (tile_size^2 pixels) that its NDC bounding box, grown by the
coverage cutoff radius, reaches; each tile's list sorted, so that sums over it run in face order whatever
the threads did (deterministic results).  Fixed capacities grow when a frame needs more (the facade's
`_run_bin` re-runs the frame)."""
import taichi as ti

from tigradsim.core.runtime import serial_loop


@ti.data_oriented
class Binner:
    """Fields: fbox (F,) (xmin, xmax, ymin, ymax: NDC box grown by the cutoff radius), tile_count (tiles,),
    counters (2: pairs, the largest tile list), and, re-allocated with the capacity, tile_faces
    (tiles, capacity) with two side tables over the same entries: pix_mask (the pair list's survivor bits,
    per pixel one bit per entry of its tile's list) and tile_grad (pixel lanes: the adjoints of each
    entry's face corners, x, y of a, b, c).  Reads the `Projector`'s projection."""

    def __init__(self, projector, tile_size, pixel_lanes):
        self.projector = projector
        self.width, self.height = projector.width, projector.height
        self.face_count = projector.face_count
        self.tile_size = int(tile_size)
        self.tiles_x = -(-self.width // self.tile_size)
        self.tiles_y = -(-self.height // self.tile_size)
        self.pixel_lanes = pixel_lanes
        self.fbox = ti.Vector.field(4, float, shape=self.face_count)
        self.tile_count = ti.field(ti.i32, shape=self.tiles_x * self.tiles_y)
        self.counters = ti.field(ti.i32, shape=2)    # number of pairs, largest tile list
        self._tree = None
        self.capacity = 0
        self.alloc(max(16, min(self.face_count, 64)))

    def alloc(self, cap):
        """Room for `cap` faces per tile (the lists are refilled by the next binning)."""
        if self._tree is not None:
            self._tree.destroy()
        fb = ti.FieldsBuilder()
        self.tile_faces = ti.field(ti.i32)
        fb.dense(ti.ij, (self.tiles_x * self.tiles_y, cap)).place(self.tile_faces)
        self.pix_mask = ti.field(ti.i32)
        fb.dense(ti.ij, (1, 1) if self.pixel_lanes else (self.width * self.height, (cap + 31) // 32)).place(
            self.pix_mask)
        self.tile_grad = ti.Vector.field(6, float)
        fb.dense(ti.ij, (self.tiles_x * self.tiles_y, cap) if self.pixel_lanes else (1, 1)).place(self.tile_grad)
        self._tree = fb.finalize()
        self.capacity = cap

    @ti.func
    def box_pixels(self, bb):
        """The pixel columns c0..c1 and rows r0..r1 (floats, not clipped to the image) whose centres lie
        in the NDC box bb = (xmin, xmax, ymin, ymax); empty when c1 < c0 or r1 < r0."""
        W = ti.static(self.width)
        H = ti.static(self.height)
        s = ti.static(float(min(self.width, self.height)))
        return ti.ceil((bb[0] * s + W - 1.0) * 0.5), ti.floor((bb[1] * s + W - 1.0) * 0.5), \
            ti.ceil((H - 1.0 - bb[3] * s) * 0.5), ti.floor((H - 1.0 - bb[2] * s) * 0.5)

    @ti.func
    def bin_faces(self, tile_faces: ti.template(), r2):
        """Each face's NDC box grown by the cutoff radius sqrt(r2) (into fbox) and the face appended to the
        list of every tile the box reaches; then each tile's list sorted.  Top-level loops."""
        TS = ti.static(self.tile_size)
        TX = ti.static(self.tiles_x)
        W = ti.static(self.width)
        H = ti.static(self.height)
        cap = ti.static(tile_faces.shape[1])
        ti.loop_config(serialize=ti.static(serial_loop(self.tiles_x * self.tiles_y)))
        for t in range(self.tiles_x * self.tiles_y):
            self.tile_count[t] = 0
            if t == 0:
                self.counters[1] = 0
        # faces -> tiles (bounding box grown by the cutoff radius)
        ti.loop_config(serialize=ti.static(serial_loop(self.face_count, 16)))
        for f in range(self.face_count):
            if self.projector.face_ok(f):
                a, b, c = self.projector.corners(f)
                r = ti.sqrt(r2) * 1.0001 + 1e-6
                xmin = ti.min(a[0], ti.min(b[0], c[0])) - r
                xmax = ti.max(a[0], ti.max(b[0], c[0])) + r
                ymin = ti.min(a[1], ti.min(b[1], c[1])) - r
                ymax = ti.max(a[1], ti.max(b[1], c[1])) + r
                bb = ti.Vector([xmin, xmax, ymin, ymax])
                self.fbox[f] = bb
                c0, c1, r0, r1 = self.box_pixels(bb)
                if c0 <= c1 and r0 <= r1 and c1 >= 0.0 and r1 >= 0.0 and c0 <= W - 1.0 and r0 <= H - 1.0:
                    ic0 = ti.cast(ti.max(c0, 0.0), ti.i32) // TS
                    ic1 = ti.cast(ti.min(c1, W - 1.0), ti.i32) // TS
                    ir0 = ti.cast(ti.max(r0, 0.0), ti.i32) // TS
                    ir1 = ti.cast(ti.min(r1, H - 1.0), ti.i32) // TS
                    for ty in range(ir0, ir1 + 1):
                        for tx in range(ic0, ic1 + 1):
                            t = ty * TX + tx
                            k = ti.atomic_add(self.tile_count[t], 1)
                            if k < cap:
                                tile_faces[t, k] = f
                            ti.atomic_max(self.counters[1], k + 1)
        # sort each tile's list (deterministic order of summation)
        ti.loop_config(serialize=ti.static(serial_loop(self.tiles_x * self.tiles_y)))
        for t in range(self.tiles_x * self.tiles_y):
            n = ti.min(self.tile_count[t], cap)
            for a_ in range(1, n):
                key = tile_faces[t, a_]
                b_ = a_ - 1
                while b_ >= 0:
                    if tile_faces[t, b_] > key:
                        tile_faces[t, b_ + 1] = tile_faces[t, b_]
                        b_ -= 1
                    else:
                        break
                tile_faces[t, b_ + 1] = key
