"""The PAC-NeRF Newtonian clip's fit model (grid RES, SUB substeps a frame, walls mu 0.5) run from a lattice aligned
with the clip's rotated box and inset by half a spacing (Genesis's regular sampler; spacing 1 / (2 RES), particle
volume box / count), instead of tigradsim's world-aligned lattice: mean mask IoU and squared pixel difference of the
splats (`newtonian_bias.mask_scores`) and the shape moments against Genesis's clip (`newtonian_bias.moments`, its
cache written by `newtonian_bias.py` first), at the truth and at the fits' estimates (the first COUNT of them).

    python benchmarks/newtonian_aligned.py RES SUB SCENE.toml COUNT
    python benchmarks/newtonian_aligned.py 24 50 benchmarks/out/pacnerf_newt/newtonian/scene.toml 2

SCENE.toml: any copy of the clip's scene file (its cameras and masks are used, not its grid).  Taichi 1.7.4 crashed
(segfault) on a third model in one process: COUNT <= 2.  Measured: benchmarks/RESULTS.md (branch newtonian)."""
import sys, json, numpy as np
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tigradsim as tgs
import newtonian_bias as nb
from vs_genesis import recorded_positions
from tigradsim.scenes.scene_build import Scene
from tigradsim.scenes.scene_file import load_scene
from tigradsim.scenes.scene_views import load_views_footage
tgs.init(arch="cpu", precision="f64")
CLIP = os.path.join(nb.HERE, 'footage', 'pacnerf', 'newtonian')
truth = json.load(open(os.path.join(CLIP, 'truth.json')))
k = truth["known"]
x, y, z, w = k["rotation_xyzw"]
R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
              [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
              [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
RES, SUB = int(sys.argv[1]), int(sys.argv[2])
h, size = 1 / (2 * RES), float(k["box"][0])          # the clip's box is a cube
n = int(np.ceil(size / h - 1e-9))
g = np.linspace(-(size - h) / 2, (size - h) / 2, n)
pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) @ R.T + np.array(k["position"])
spec = load_scene(sys.argv[3])
scene = Scene(spec, load_views_footage(spec), requires_grad=False, unknowns=True)
gx = nb.genesis_frames(CLIP, '/opt/venvs/genesis/bin/python',
                        os.path.join(nb.HERE, 'out', 'newtonian_bias', 'genesis_f32.npz'))
theirs = nb.moments(gx)
dt, every = 1 / (24 * SUB), SUB
steps = every * 13
POINTS = (("truth", 25.0, 1e5), ("g24_estimate", 31.31, 2.329e4), ("g32_estimate", 29.69, 2.089e4))
for label, eta, K in POINTS[:int(sys.argv[4])]:
    b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
    b.add_mpm_grid(lower=(0, 0, 0), upper=(1, 1, 1), resolution=RES, mu=0.5)
    b.add_mpm(particles=pts, particle_volume=size ** 3 / len(pts), material="mpm_newtonian",
              params={"viscosity": eta, "bulk_modulus": K}, density=1000.0)
    model = b.finalize(requires_grad=False)
    xs = recorded_positions(tgs, model, dt, steps, every)          # the 14 footage frames
    mse, iou = nb.mask_scores(scene, xs, h / 2)
    m = nb.moments(xs)
    print(json.dumps(dict(point=label, particles=len(pts), masks_mse=mse, masks_iou=iou, spread_last=float(m[-1, 2]),
                          centroid_y_last=float(m[-1, 0]), thickness_last=float(m[-1, 1]),
                          max_abs_spread_diff=float(np.abs(m[:, 2] - theirs[:, 2]).max()),
                          max_abs_centroid_diff=float(np.abs(m[:, 0] - theirs[:, 0]).max()))), flush=True)
