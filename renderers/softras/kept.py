"""Kept frames: what the backward pass needs of each frame, kept by the forward pass.

With keep_frames (the default below `KEEP_FRAMES_MAX_BYTES`), each frame's per-pixel sums (S, and for
colour sw, sc and the softmax's zmax) and its (pixel, face) pairs are kept here, and the backward pass
copies them back (`PairList.restore`) after re-running only the projection, instead of re-binning and
re-compositing the frame.  Pixel lanes keep only S (their binning writes it here directly) and bin the
tile lists again in their backward kernel.  Without keep_frames there is one slot: the last frame's.
Each slot remembers the render (its token) whose data it holds.
"""
import taichi as ti


@ti.data_oriented
class KeptFrames:
    """Fields: kept_log (slots, H, W) (S per pixel), kept_w, kept_z (colour slots, H, W), kept_c (colour
    slots, H, W) of RGB, and kept_pairs (frames, capacity) of (pixel, face), allocated as pairs appear."""

    def __init__(self, frames, height, width, keep_frames, colour):
        fl = float
        self.frames = frames
        self.keep_frames = keep_frames
        S = frames if keep_frames else 1
        Sc = S if colour else 1
        self.kept_log = ti.field(fl, shape=(S, height, width))
        self.kept_w = ti.field(fl, shape=(Sc, height, width))
        self.kept_c = ti.Vector.field(3, fl, shape=(Sc, height, width))
        self.kept_z = ti.field(fl, shape=(Sc, height, width))
        self._tree = None
        self.capacity = 0
        self.tokens = [None] * S      # the render (token) whose data each frame's slot holds

    def alloc(self, cap):
        """Room for `cap` pairs per kept frame; the frames kept so far are dropped (their backward passes
        re-render them)."""
        if self._tree is not None:
            self._tree.destroy()
        fb = ti.FieldsBuilder()
        self.kept_pairs = ti.Vector.field(2, ti.i32)
        fb.dense(ti.ij, (self.frames, cap)).place(self.kept_pairs)
        self._tree = fb.finalize()
        self.capacity = cap
        self.tokens = [None] * self.frames

    def fits(self, n_pairs):
        """Whether `n_pairs` pairs fit the kept capacity (False before the first `alloc`)."""
        return self._tree is not None and n_pairs <= self.capacity

    def holds(self, frame, token):
        """Whether frame `frame`'s slot holds the render `token`."""
        return self.keep_frames and self.tokens[frame] is token

    @ti.func
    def sum_slot(self, frame):
        """The slot of kept_log holding frame `frame`'s per-pixel sums in pixel lanes: the frame's own
        with keep_frames, else the one slot (the last frame binned)."""
        slot = frame
        if ti.static(not self.keep_frames):
            slot = 0
        return slot
