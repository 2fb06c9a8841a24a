"""Shading stage: what a face looks like at a pixel, and how a pixel's faces blend into its value.

* C_j(p): per-vertex colours interpolated with the clipped perspective-correct barycentrics, or per-face
  colours, optionally Lambert-shaded: C = albedo * (ambient + sum_l light_color_l max(0, n .
  normalize(light_dir_l))), n the world-space face normal (CCW winding; normals="flat") or the
  normalised interpolation of area-weighted vertex normals (normals="smooth").  `light_dir` points
  from the surface *towards* the light.
* depth-softmax weights w_j = D_j exp(z_j / gamma), z_j the normalised inverse depth
  (`Projector.face_geom`); background B(p) = background + background_image[p];
* the pixel (`pixel_value`), from its sums S = sum_j log(1 - D_j), sw = sum_j w_j, sc = sum_j w_j C_j:
  - silhouette: A = 1 - exp(c S) (coverage.py);
  - blend "coverage" (default for RGB): I = A C + (1 - A) B with C = sc / sw (no background term): the
    colour of the visible surface laid over the background by the soft silhouette, so colour carries
    geometry gradients through A at the outline at any gamma (DESIGN.md section 7);
  - blend "softmax" (SoftRas / PyTorch3D): I = (sc + w_b B) / (sw + w_b), w_b = exp(depth_eps / gamma)
    (with the stable softmax's zmax): at small gamma w_b vanishes next to any face within the cutoff
    and colour carries no geometry gradient (a warning says so at construction).
"""
import numpy as np
import taichi as ti

from tigradsim.core.runtime import np_float, serial_loop

from .coverage import silhouette_alpha
from .options import color_array, err


@ti.data_oriented
class Shader:
    """Fields (all differentiable): vertex_colors (V,), face_colors (F,), light_dir, light_color (lights,),
    ambient, background (3,), background_image (H, W) of RGB; scratch: light_unit, face_shade (F,) (flat
    Lambert's per-face shade), vnormal_sum, vnormal (V,) (smooth normals).  Reads the `Projector`'s faces,
    vid and projection."""

    def __init__(self, projector, surface, blending, lights, coverage_power, serial):
        fl = float
        p = projector
        self.projector = projector
        V, F, H, W = p.vertex_count, p.face_count, p.height, p.width
        self.vertex_count, self.face_count, self.width, self.height = V, F, W, H
        self.shading, self.color_mode = surface.shading, surface.color_mode
        self.smooth = surface.shading == "lambert" and surface.normals == "smooth"
        self.blend = blending.blend
        self.depth_eps = float(blending.depth_eps)
        self.coverage_power = coverage_power
        self.serial = serial
        ldir, lcol = lights
        self.light_count = len(ldir)
        self.face_shade = ti.Vector.field(3, fl, shape=F, needs_grad=True)
        nv = V if self.smooth else 1
        self.vnormal_sum = ti.Vector.field(3, fl, shape=nv, needs_grad=True)   # area-weighted sums
        self.vnormal = ti.Vector.field(3, fl, shape=nv, needs_grad=True)       # unit vertex normals
        self.light_unit = ti.Vector.field(3, fl, shape=self.light_count, needs_grad=True)
        self.vertex_colors = ti.Vector.field(3, fl, shape=V, needs_grad=True)
        self.face_colors = ti.Vector.field(3, fl, shape=F, needs_grad=True)
        self.light_dir = ti.Vector.field(3, fl, shape=self.light_count, needs_grad=True)
        self.light_color = ti.Vector.field(3, fl, shape=self.light_count, needs_grad=True)
        self.ambient = ti.Vector.field(3, fl, shape=(), needs_grad=True)
        self.background = ti.Vector.field(3, fl, shape=(), needs_grad=True)
        self.background_image = ti.Vector.field(3, fl, shape=(H, W), needs_grad=True)
        npf = np_float()
        self.vertex_colors.from_numpy(color_array("vertex_colors", surface.vertex_colors, V, (1.0, 1.0, 1.0))
                                      .astype(npf))
        self.face_colors.from_numpy(color_array("face_colors", surface.face_colors, F, (1.0, 1.0, 1.0)).astype(npf))
        self.light_dir.from_numpy(ldir.astype(npf))
        self.light_color.from_numpy(lcol.astype(npf))
        self.ambient[None] = color_array("ambient", surface.ambient, 1, None)[0].tolist()
        self.set_background(blending.background)

    def set_background(self, value):
        """Set the background B(p) = `background` + `background_image`[p].

        value: an RGB triple (3,): a constant colour (the plate is zeroed); or a plate
        of shape (H, W, 3) (or (H, W) / (H, W, 1) grey), floats in [0, 1] or uint8 (divided by 255),
        e.g. the median of footage frames (`background` is zeroed).
        """
        arr = np.asarray(value)
        if arr.shape == (3,) or arr.ndim == 1:
            self.background[None] = color_array("background", arr, 1, None)[0].tolist()
            self.background_image.fill(0.0)
            return
        H, W = self.height, self.width
        if arr.shape not in ((H, W), (H, W, 1), (H, W, 3)):
            raise err(ValueError, f"background has shape {arr.shape}; expected an RGB triple (3,) or a plate of "
                                  f"shape ({H}, {W}, 3), ({H}, {W}, 1) or ({H}, {W}) (the image size)")
        if arr.dtype == np.uint8:
            plate = arr.astype(np.float64) / 255.0
        elif np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer):
            plate = arr.astype(np.float64)
            if not np.all(np.isfinite(plate)):
                raise err(ValueError, "background plate contains a non-finite value")
            lo, hi = float(plate.min()), float(plate.max())
            if lo < 0.0 or hi > 1.0 + 1e-6:
                raise err(ValueError, f"background plate values lie in [{lo:g}, {hi:g}]; expected [0, 1] "
                                      "(floats) or uint8 (0-255)")
        else:
            raise err(TypeError, f"background plate has dtype {arr.dtype}; expected floats in [0, 1] or uint8")
        if plate.ndim == 2:
            plate = plate[..., None]
        if plate.shape[-1] == 1:
            plate = np.repeat(plate, 3, axis=-1)
        self.background[None] = [0.0, 0.0, 0.0]
        self.background_image.from_numpy(np.ascontiguousarray(plate, dtype=np_float()))

    # ------------------------------------------------------------- per pixel
    @ti.func
    def albedo(self, f, bc):
        if ti.static(self.color_mode == "vertex"):
            idx = self.projector.faces[f]
            return bc[0] * self.vertex_colors[idx[0]] + bc[1] * self.vertex_colors[idx[1]] \
                + bc[2] * self.vertex_colors[idx[2]]
        else:
            return self.face_colors[f]

    @ti.func
    def lambert(self, n):
        """ambient + sum_l light_color_l max(0, n . l_l) for a unit normal n."""
        shade = self.ambient[None]
        for l in ti.static(range(self.light_count)):
            shade += self.light_color[l] * ti.max(n.dot(self.light_unit[l]), 0.0)
        return shade

    @ti.func
    def shaded(self, f, bc):
        """C_f at barycentrics bc (module docstring)."""
        if ti.static(self.smooth):
            idx = self.projector.faces[f]
            n = bc[0] * self.vnormal[idx[0]] + bc[1] * self.vnormal[idx[1]] + bc[2] * self.vnormal[idx[2]]
            return self.albedo(f, bc) * self.lambert(n / ti.sqrt(n.dot(n) + 1e-30))
        elif ti.static(self.shading == "lambert"):
            return self.albedo(f, bc) * self.face_shade[f]
        else:
            return self.albedo(f, bc)

    @ti.func
    def pixel_value(self, i, j, slog, sw, sc, zmax, gamma):
        """The image value of pixel (i, j) from its sums over faces: slog = S = sum log(1 - D),
        sw = sum of softmax weights, sc = sum of weighted colours, zmax the stable softmax's shift
        (module docstring)."""
        if ti.static(self.shading == "silhouette"):
            # forward only (silhouettes have their own backward): where no face is within the cutoff
            # (most pixels of a small object) A = 0 without an exp
            return ti.Vector([silhouette_alpha(slog, ti.static(self.coverage_power))])
        else:
            # every local assigned once (`PairList.accumulate`'s reverse differentiates this)
            alpha = 1.0 - ti.exp(ti.static(self.coverage_power) * slog)
            bg = self.background[None] + self.background_image[i, j]
            rgb = bg
            if ti.static(self.blend == "coverage"):
                # C = sc / sw: the faces' colour alone (sw > 0 wherever a pair exists:
                # the face at zmax has weight D >= coverage_eps); A = 0 elsewhere
                rgb = alpha * (sc / ti.select(sw > 0.0, sw, 1.0)) + (1.0 - alpha) * bg
            else:
                eb = ti.exp((self.depth_eps - zmax) / gamma)
                rgb = (sc + eb * bg) / (sw + eb)
            return ti.Vector([rgb[0], rgb[1], rgb[2], alpha])

    # ------------------------------------------------------------- per frame
    @ti.kernel
    def prepare(self, verts: ti.template(), slot: ti.i32):
        """Project verts[slot] (`Projector.project`) and shade every face (`shade_faces`); differentiable."""
        self.project_and_shade(verts, slot)

    @ti.func
    def project_and_shade(self, verts: ti.template(), slot: ti.template()):
        """`prepare`'s body (pixel-lane silhouettes run it as the first loops of their kernels: no launch
        of its own).  `prepare` must hold loops alone for Taichi's autodiff."""
        self.projector.project(verts, slot)
        self.shade_faces(verts, slot)

    @ti.func
    def shade_faces(self, verts: ti.template(), slot: ti.template()):
        """Lambert: unit light directions, then each face's shade (flat) or the unit vertex normals (smooth)."""
        if ti.static(self.shading == "lambert"):
            ti.loop_config(serialize=ti.static(serial_loop(self.light_count)))
            for l in range(self.light_count):
                ld = self.light_dir[l]
                self.light_unit[l] = ld / ti.sqrt(ld.dot(ld) + 1e-30)
            if ti.static(self.smooth):
                ti.loop_config(serialize=ti.static(serial_loop(self.vertex_count)))
                for v in range(self.vertex_count):
                    self.vnormal_sum[v] = ti.Vector([0.0, 0.0, 0.0])
                ti.loop_config(serialize=self.serial)   # shared vertex sums (and adjoints) in face order
                for f in range(self.face_count):
                    idx = self.projector.faces[f]
                    p0 = verts[slot, self.projector.vid[idx[0]]]
                    n = (verts[slot, self.projector.vid[idx[1]]] - p0).cross(verts[slot, self.projector.vid[idx[2]]] - p0)
                    for k in ti.static(range(3)):
                        self.vnormal_sum[idx[k]] += n          # area-weighted
                ti.loop_config(serialize=ti.static(serial_loop(self.vertex_count)))
                for v in range(self.vertex_count):
                    ns = self.vnormal_sum[v]
                    self.vnormal[v] = ns / ti.sqrt(ns.dot(ns) + 1e-30)
            else:
                ti.loop_config(serialize=self.serial)   # vertex and light adjoints in face order
                for f in range(self.face_count):
                    idx = self.projector.faces[f]
                    p0 = verts[slot, self.projector.vid[idx[0]]]
                    n = (verts[slot, self.projector.vid[idx[1]]] - p0).cross(verts[slot, self.projector.vid[idx[2]]] - p0)
                    self.face_shade[f] = self.lambert(n / ti.sqrt(n.dot(n) + 1e-30))

    @ti.func
    def zero_grads(self):
        """Zero the gradients of this stage's scratch fields (reused by every frame)."""
        ti.loop_config(serialize=ti.static(serial_loop(self.face_shade.shape[0])))
        for f in range(self.face_shade.shape[0]):
            self.face_shade.grad[f] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.vnormal.shape[0])))
        for v in range(self.vnormal.shape[0]):
            self.vnormal.grad[v] = ti.Vector([0.0, 0.0, 0.0])
            self.vnormal_sum.grad[v] = ti.Vector([0.0, 0.0, 0.0])
        ti.loop_config(serialize=ti.static(serial_loop(self.light_unit.shape[0])))
        for l in range(self.light_unit.shape[0]):
            self.light_unit.grad[l] = ti.Vector([0.0, 0.0, 0.0])
