"""The committed clips of interacting scenes whose motion Warp made (benchmarks/make_interacting_footage.py,
issue 46 item 6): complete, their masks equal to the true trajectories' surfaces projected with truth.json's
camera, and their scene files stating only what a user has.  No Warp, no Mitsuba, no fit: a few seconds."""
import glob
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
FOOTAGE = os.path.join(ROOT, "benchmarks", "footage")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import make_footage  # noqa: E402

CLIPS = ("warp_ramp_boxes", "warp_ball_box", "warp_cloth_sphere")
SUB = 4                      # samples per pixel side of the reference coverage


def truth_of(clip):
    with open(os.path.join(FOOTAGE, clip, "truth.json")) as fh:
        return json.load(fh)


def coverage(triangles_uv, width, height):
    """(H, W) fraction of each pixel (centres at integers) inside the union of 2D triangles (N, 3, 2), from
    SUB x SUB samples per pixel, each triangle tested only within its bounding box."""
    hit = np.zeros((height * SUB, width * SUB), dtype=bool)
    off = (np.arange(SUB) + 0.5) / SUB - 0.5
    for tri in triangles_uv:
        lo = np.floor((tri.min(0) + 0.5) * SUB).astype(int).clip(0, [width * SUB, height * SUB])
        hi = np.ceil((tri.max(0) + 0.5) * SUB).astype(int).clip(0, [width * SUB, height * SUB])
        if (hi <= lo).any():
            continue
        cols = np.arange(lo[0], hi[0])
        rows = np.arange(lo[1], hi[1])
        u = (cols // SUB + off[cols % SUB])[None, :]
        v = (rows // SUB + off[rows % SUB])[:, None]
        a, b, c = tri
        d = [(q[0] - p[0]) * (v - p[1]) - (q[1] - p[1]) * (u - p[0]) for p, q in ((a, b), (b, c), (c, a))]
        inside = ((d[0] >= 0) & (d[1] >= 0) & (d[2] >= 0)) | ((d[0] <= 0) & (d[1] <= 0) & (d[2] <= 0))
        hit[lo[1]:hi[1], lo[0]:hi[0]] |= inside
    return hit.reshape(height, SUB, width, SUB).mean(axis=(1, 3))


def posed_surfaces(clip, truth, k):
    """World triangles (N, 3, 3) of the moving objects at frame k, from truth.json's trajectory."""
    from tigradsim.io.meshes import box_surface, boundary_faces, load_obj, load_tetgen
    from tigradsim.physics.rigid import quat_to_matrix_np
    traj, out = truth["trajectory"], []
    folder = os.path.join(FOOTAGE, clip)

    def box(obj, position, quat):
        corners = np.unique(load_obj(os.path.join(folder, obj["mesh"]))[0], axis=0)
        v, f = box_surface(corners.max(0) - corners.min(0))
        return (v @ quat_to_matrix_np(quat).T + position)[f]

    if clip == "warp_cloth_sphere":          # the cloth alone (the sphere is scenery): Warp's vertices, its triangles
        x = np.load(os.path.join(folder, "cloth_vertices.npz"))["x"][k].astype(np.float64)
        return x[load_obj(os.path.join(folder, truth["objects"]["cloth"]["mesh"]))[1]]
    if clip == "warp_ramp_boxes":
        for j, name in enumerate(traj["objects"]):
            out.append(box(truth["objects"][name], traj["position"][k][j], traj["quaternion_xyzw"][k][j]))
    else:
        x = np.load(os.path.join(folder, "ball_vertices.npz"))["x"][k].astype(np.float64)
        _, tets = load_tetgen(os.path.join(folder, truth["objects"]["ball"]["mesh"]["node"]))
        out.append(x[boundary_faces(tets)])
        out.append(box(truth["objects"]["box"], traj["box_position"][k], traj["box_quaternion_xyzw"][k]))
    return np.concatenate(out)


@pytest.mark.parametrize("clip", CLIPS)
def test_clip_files_and_truth(clip):
    truth = truth_of(clip)
    n, size = truth["frame_count"], truth["image_size"]
    assert 30 <= n <= 40 and (size["width"], size["height"]) == (128, 128)
    for kind in ("rgb", "mask"):
        paths = sorted(glob.glob(os.path.join(FOOTAGE, clip, f"{kind}_*.png")))
        assert [os.path.basename(p) for p in paths] == [f"{kind}_{k:04d}.png" for k in range(n)]
    assert truth["simulation"]["simulator"].startswith("NVIDIA Warp")
    assert max(np.abs(truth["camera_check"]["error_px"]).ravel()) < 0.5
    assert len(truth["trajectory"]["times"]) == n
    folder_bytes = sum(os.path.getsize(p) for p in glob.glob(os.path.join(FOOTAGE, clip, "*")))
    assert folder_bytes < 1.5e6


@pytest.mark.parametrize("clip", CLIPS)
def test_masks_match_truth_projection(clip):
    """Each frame's mask equals the coverage of the true surfaces (the trajectory posed, projected with the
    OpenCV camera): per frame within 3 % of the covered area, and no pixel off by more than the sampling
    noise of 64 samples at an edge (ties truth.json's camera and trajectory to the footage)."""
    truth = truth_of(clip)
    cam = truth["camera"]
    K, R, t = (np.array(cam[k]) for k in ("K", "R", "t"))
    masks = make_footage.load_clip(os.path.join(FOOTAGE, clip), "mask") / 255.0
    w, h = truth["image_size"]["width"], truth["image_size"]["height"]
    for k in range(0, truth["frame_count"], 5):
        tris = posed_surfaces(clip, truth, k)
        uv = make_footage.project(K, R, t, tris.reshape(-1, 3)).reshape(-1, 3, 2)
        ref = coverage(uv, w, h)
        assert np.abs(masks[k] - ref).sum() < 0.03 * ref.sum(), k
        assert np.abs(masks[k] - ref).max() < 0.25, k


def test_scene_files_state_what_a_user_has():
    """The scene files give no contact constant of the engine (fitted as nuisances, or assumed; the cloth's ground
    states the library's documented light-cloth guess, none of Warp's values), the initial states of truth.json, and
    never a true unknown: box A's mass is the unit (1), so box B's is the ratio."""
    from tigradsim.scenes.scene_file import load_scene
    for clip in CLIPS:
        spec = load_scene(os.path.join(FOOTAGE, clip, "scene.toml"))
        truth = truth_of(clip)
        if clip == "warp_cloth_sphere":
            guess = {"ke": 500.0, "kd": 0.1, "kf": 0.3}
            assert set(spec.ground_given) == set(guess) and all(spec.ground[k] == v for k, v in guess.items())
            assert all(spec.ground[k] != truth["contact"][k] for k in guess)
            assert spec.objects["cloth"].mass == truth["objects"]["cloth"]["mass"]
            assert spec.colliders["sphere"].given == frozenset()
        else:
            assert not spec.ground_given
        assert spec.fit.contact_constants == {"warp_ramp_boxes": "nuisance", "warp_ball_box": "assume",
                                              "warp_cloth_sphere": "assume"}[clip]
        for name, o in spec.objects.items():
            assert np.allclose(o.position, truth["objects"][name]["initial_pose"]["position"])
            assert not o.contact
        names = {u.target for u in spec.unknowns if not u.nuisance}
        assert names == {"warp_ramp_boxes": {"ramp.mu", "box_b.mass"},
                         "warp_ball_box": {"ball.mu", "ball.lam", "ball.damping"},
                         "warp_cloth_sphere": {"cloth.mu", "cloth.lam", "cloth.bending", "cloth.damping"}}[clip]
        for u in spec.unknowns:
            assert u.init not in [v for v in truth["truth"].values() if isinstance(v, float)]
    ramp = load_scene(os.path.join(FOOTAGE, "warp_ramp_boxes", "scene.toml"))
    assert ramp.objects["box_a"].mass == 1.0
    # the ramp takes the ground's contact constants, so the ground's nuisance constants move it too; the two boxes'
    # contact with each other has its own ("bodies.X", tigradsim/scenes/pair_constants.py)
    assert {u.target for u in ramp.unknowns if u.nuisance} == {f"{o}.{x}" for o in ("ground", "bodies")
                                                               for x in ("ke", "kd", "kf", "mu")}
    assert ramp.colliders["ramp"].given == frozenset()


def test_ball_scene_touches_at_its_mesh():
    """The ball's vertices touch at the mesh's surface (radius 0: the mesh is the ball, as in Warp's clip, whose
    particle radius is 0), not 1 cm outside it (a soft object's default contact radius); stated, so the fit does
    not report it as an assumed constant (scenes/assumed.py)."""
    from tigradsim.scenes.scene_file import load_scene
    spec = load_scene(os.path.join(FOOTAGE, "warp_ball_box", "scene.toml"))
    assert spec.objects["ball"].contact_radius == 0.0 and spec.objects["ball"].contact_radius_stated
    assert truth_of("warp_ball_box")["contact"]["particle_radius"] == 0.0


def test_mass_distributions_option_rejects_unknown_names(tmp_path, capsys):
    """interacting_footage.py --mass-distributions names the option, the bad value and the choices, before any
    fit runs; a clip without a soft object is refused by name."""
    import interacting_footage
    with pytest.raises(SystemExit):
        interacting_footage.main(["--clips", "warp_ball_box", "--mass-distributions", "volume,lumped",
                                  "--out", str(tmp_path), "--rescore"])
    err = capsys.readouterr().err
    assert "--mass-distributions" in err and "'volume,lumped'" in err and "equal" in err
    with pytest.raises(ValueError, match="warp_ramp_boxes.*no soft object"):
        interacting_footage.compare_distributions("warp_ramp_boxes", os.path.join(FOOTAGE, "warp_ramp_boxes",
                                                  "scene.toml"), [], str(tmp_path), ["volume"], 1.0, True)
