"""The `tigradsim` command end to end: footage of a pushed box rendered by tigradsim itself
at a 4x finer time step (8-bit PNG frames + masks), a scene file for it, `tigradsim render`
(outline over the footage) and `tigradsim fit --quick` (recover the mass); the same scene
written z-up renders the same frames; a bad scene file exits with status 2 and names the
file and the key."""
import json
import math
import os

import numpy as np
import pytest

import tigradsim as tgs
from tigradsim import cli
from tigradsim.scenes.scene_file import Z_UP_TO_Y_UP

pytestmark = pytest.mark.slow          # runs the `tigradsim` command in subprocesses

TRUE_MASS = 1.0
FPS, FINE_SUBSTEPS, DURATION, RES = 30.0, 32, 0.5, 32
SIZE = (0.2, 0.1, 0.15)
EYE, TARGET, FOV = (0.0, 0.45, 0.9), (0.0, 0.05, 0.0), 40.0
PUSH = dict(force=(6.0, 0.0, 0.0), start=0.1, end=0.35)


def _opencv(eye, target, fov, W, H):
    """OpenCV K, R, t of a look-at camera (DESIGN.md section 7)."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    fwd = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(fwd, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    R = np.stack([right, -np.cross(right, fwd), fwd])
    f = (min(W, H) / 2) / math.tan(math.radians(fov) / 2)
    return np.array([[f, 0, W / 2 - 0.5], [0, f, H / 2 - 0.5], [0, 0, 1.0]]), R, -R @ eye


def _render_footage(folder):
    """The truth: simulated at dt = 1/(30 x 32) (the fit uses 8 steps per frame), 8-bit PNGs."""
    from tigradsim.renderers import Camera, SoftRasterizer
    from tigradsim.physics.rigid import RigidSurface
    from tigradsim.fitting.sysid import render_surface
    from tigradsim.io.video import save_frames

    tgs.init(arch="cpu", precision="f64")
    b = tgs.SceneBuilder(gravity=(0.0, -9.8, 0.0))
    b.add_ground(ke=1e4, kd=10.0, kf=10.0, mu=0.4)
    v, f = tgs.meshes.box_surface(SIZE)
    body = b.add_rigid_body(v, f, mass=TRUE_MASS, position=(-0.1, SIZE[1] / 2, 0.0))
    tgs.add_body_force(b, body, **PUSH)
    model = b.finalize(requires_grad=False)
    dt = 1.0 / (FPS * FINE_SUBSTEPS)
    sim = tgs.Simulator(model, dt=dt, steps=int(round(DURATION / dt)))
    surf = RigidSurface(sim, every=FINE_SUBSTEPS)
    cam = Camera(eye=EYE, target=TARGET, fov=FOV, width=RES, height=RES)
    ren = SoftRasterizer(cam, surf.faces, surf.vertex_count, frames=surf.frames, sigma=1e-5, shading="silhouette")
    render_surface(sim, ren, surf, FINE_SUBSTEPS)
    sim.run()
    alpha = ren.image.to_numpy()[..., 0]
    save_frames(alpha, os.path.join(folder, "masks"), prefix="mask")
    save_frames(0.25 + 0.6 * alpha[..., None] * np.array([1.0, 0.8, 0.6]), os.path.join(folder, "frames"),
                prefix="frame")
    return len(alpha)


def _toml(data) -> str:
    """A small TOML writer (tables, arrays of tables, numbers, strings, booleans, arrays)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, (list, tuple, np.ndarray)):
            return "[" + ", ".join(val(x) for x in np.asarray(v).tolist()) + "]" if isinstance(v, np.ndarray) \
                else "[" + ", ".join(val(x) for x in v) + "]"
        return repr(float(v)) if isinstance(v, float) else str(v)

    lines = []

    def table(prefix, d):
        simple = {k: v for k, v in d.items() if not isinstance(v, dict) and not (isinstance(v, list) and v and
                                                                                 isinstance(v[0], dict))}
        if prefix:
            lines.append(f"[{prefix}]")
        lines.extend(f"{json.dumps(k) if '.' in k else k} = {val(v)}" for k, v in simple.items())
        lines.append("")
        for k, v in d.items():
            key = json.dumps(k) if "." in k else k
            if isinstance(v, dict):
                table(f"{prefix}.{key}" if prefix else key, v)
            elif isinstance(v, list) and v and isinstance(v[0], dict):
                for item in v:
                    lines.append(f"[[{prefix + '.' if prefix else ''}{key}]]")
                    lines.extend(f"{a} = {val(b)}" for a, b in item.items())
                    lines.append("")

    table("", data)
    return "\n".join(lines)


def _scene(up="y"):
    K, R, t = _opencv(EYE, TARGET, FOV, RES, RES)
    M = np.eye(3) if up == "y" else Z_UP_TO_Y_UP       # file axes -> y-up world
    to_file = M.T
    size = np.abs(to_file @ np.array(SIZE))
    return {
        "world": {"up": up, "gravity": 9.8},
        "simulation": {"substeps": 8},
        "ground": {"ke": 1e4, "kd": 10.0, "kf": 10.0, "mu": 0.4},
        "objects": {"box": {"type": "rigid", "box": size.tolist(), "mass": 1.4,
                            "position": (to_file @ np.array([-0.1, SIZE[1] / 2, 0.0])).tolist()}},
        "forces": [{"object": "box", "force": (to_file @ np.array(PUSH["force"])).tolist(), "start": PUSH["start"],
                    "end": PUSH["end"]}],
        "camera": {"K": K.tolist(), "R": (R @ M).tolist(), "t": t.tolist(), "width": RES, "height": RES},
        "footage": {"frames": "frames/frame_%04d.png", "masks": "masks/mask_*.png", "fps": FPS},
        "unknowns": {"box.mass": {"init": 1.4, "lower": 0.2, "upper": 5.0}},
        "fit": {"iterations": 12, "optimizer": "bfgs", "polish_lr": 0.3, "sigma": 1e-4, "blur": [0.0, 1.0]},
    }


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("box_push")
    frames = _render_footage(str(folder))
    for up in ("y", "z"):
        (folder / f"scene_{up}.toml").write_text(_toml(_scene(up)))
    return folder, frames


def _run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, json.loads(out.strip().splitlines()[-1]), out, err


def test_help(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "render" in text and "fit" in text and "SCENE" not in text.split("usage")[0]
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    assert "--quick" in capsys.readouterr().out


def test_render_then_fit_recovers_mass(clip, tmp_path, capsys):
    folder, frames = clip
    code, summary, out, _ = _run(["render", folder / "scene_y.toml", "--out", tmp_path / "check"], capsys)
    assert code == 0 and summary["ok"] and summary["frames"] == frames
    assert summary["steps"] == 120 and summary["blended_frames"] == 0    # 8 steps per frame: no blending
    assert summary["iou"]["first"] > 0.8            # the start pose and the camera are right
    assert summary["iou"]["last"] < 0.7             # the guessed (heavier) box lags behind by the end
    for key in ("outline_gif", "outline_png"):
        assert os.path.getsize(summary["files"][key]) > 0
    assert len(os.listdir(summary["files"]["frames"])) == frames

    code, result, out, _ = _run(["fit", folder / "scene_y.toml", "--out", tmp_path / "fit", "--quick"], capsys)
    assert code == 0 and result["ok"]
    assert "iter" in out and "box.mass" in out     # progress was printed
    mass = result["estimates"]["box.mass"]
    assert abs(mass - TRUE_MASS) / TRUE_MASS < 0.02, result
    assert result["std"]["box.mass"] is not None and result["std"]["box.mass"] > 0
    assert result["loss_final"] < 0.2 * result["loss_initial"] and result["iou_final"] > summary["iou"]["mean"]
    with open(result["files"]["estimates_json"]) as fh:
        report = json.load(fh)
    u = report["unknowns"]["box.mass"]
    assert u["initial"] == 1.4 and u["ci95"][0] < u["estimate"] < u["ci95"][1]
    md = open(result["files"]["estimates_md"]).read()
    assert "| box.mass | 1.4 |" in md
    for key in ("loss_plot", "param_plot", "fit_outline_gif", "initial_outline_gif"):
        assert os.path.getsize(result["files"][key]) > 0


def test_z_up_scene_renders_the_same(clip, tmp_path, capsys):
    """The z-up file (everything rotated by one fixed rotation) gives the same rendered frames."""
    import imageio.v3 as iio
    folder, frames = clip
    runs = {}
    for up in ("y", "z"):
        pin = ["--pin-threads"] if up == "z" else []      # where the threads run changes no pixel
        code, summary, _, _ = _run(["render", folder / f"scene_{up}.toml", "--out", tmp_path / up] + pin, capsys)
        assert code == 0
        cpus, why = summary["threads"]["pinned_cpus"], summary["threads"]["unpinned_because"]
        if pin:
            assert (len(cpus) >= 2 and why == "") or (cpus == [] and why), summary["threads"]
        else:
            assert cpus == [] and "pin_threads=False" in why
        runs[up] = np.stack([iio.imread(os.path.join(summary["files"]["frames"], f))
                             for f in sorted(os.listdir(summary["files"]["frames"]))]).astype(int)
    # The same silhouettes: the same area and centroid in every frame.  Not pixel for pixel:
    # the rotated box's quads are split along the other diagonals, which changes the soft
    # coverage near the corners where the triangles meet (measured: areas within 0.6 %,
    # centroids within 0.04 px; a wrong axis mapping moves the box by pixels).
    y, z = runs["y"] / 255.0, runs["z"] / 255.0
    assert y.shape == z.shape and (y > 0.5).sum(axis=(1, 2)).min() > 20     # the box is in view in every frame
    rows, cols = np.mgrid[0:y.shape[1], 0:y.shape[2]]

    def centroid(a):
        return np.stack([(a * rows).sum(axis=(1, 2)), (a * cols).sum(axis=(1, 2))], 1) / a.sum(axis=(1, 2))[:, None]

    assert np.abs(y.sum(axis=(1, 2)) / z.sum(axis=(1, 2)) - 1.0).max() < 0.02
    assert np.abs(centroid(y) - centroid(z)).max() < 0.1
    # and the same motion, to round-off (f64)
    from tigradsim.scenes.scene_build import Scene, load_scene_footage
    from tigradsim.scenes.scene_file import load_scene
    tgs.init(arch="cpu", precision="f64")
    final = {}
    for up in ("y", "z"):
        spec = load_scene(folder / f"scene_{up}.toml")
        scene = Scene(spec, load_scene_footage(spec), requires_grad=False)
        scene.sim.run()
        final[up] = scene.sim.final_state("body_q")[0]
    assert np.abs(final["y"][:3] - final["z"][:3]).max() < 1e-9 and final["y"][0] > -0.08   # pushed along +x


def test_bad_scene_exits_with_the_key(clip, tmp_path, capsys):
    folder, _ = clip
    data = _scene("y")
    data["objects"]["box"]["mass"] = -1
    bad = folder / "bad.toml"
    bad.write_text(_toml(data))
    code, result, _, err = _run(["fit", bad, "--out", tmp_path / "x"], capsys)
    assert code == 2 and result == {"ok": False, "command": "fit",
                                    "error": "bad.toml: [objects.box] mass: expected a positive number, got -1"}
    assert "bad.toml: [objects.box] mass" in err
    data = _scene("y")
    data["fit"]["resolution"] = 12
    bad.write_text(_toml(data))
    code, result, _, _ = _run(["render", bad, "--out", tmp_path / "x"], capsys)
    assert code == 2 and "[fit] resolution: expected a width that divides the footage's 32x32 pixels" in result["error"]


def test_laws_compares_every_contact_law(clip, tmp_path, capsys):
    """`tigradsim laws`: one fit per contact law of the library, a table and a combined estimate (the clip was
    made with the default capped law, which must be among the laws that fit as well as the best)."""
    folder, _ = clip
    code, result, out, _ = _run(["laws", folder / "scene_y.toml", "--out", tmp_path / "laws", "--quick"], capsys)
    assert code == 0 and result["ok"] and result["command"] == "laws"
    # the clip's own law, or Warp's friction at 0.01 m/s, which differs from it only below 1 cm/s of slip (with
    # --quick's one start and few iterations either may fit a little better)
    assert result["best"] in ("capped", "capped+warp(0.01)")
    # the clip's own law is among the equally good (measured: losses 0.08 % apart, 2 dL / s^2 = 12.8, which the
    # pixel likelihood-ratio test alone called distinguishable; within tie_rtol = 5 % it is a tie, fitting/ties.py)
    assert "capped" in result["equally_good"] and "capped+warp(0.01)" in result["equally_good"]
    with open(result["files"]["laws_json"]) as fh:
        table = json.load(fh)
    from tigradsim.scenes.law_compare import LAWS
    assert sorted(r["label"] for r in table["rows"]) == sorted(LAWS)
    assert {"capped+warp(0.01)", "capped+warp(0.1)"} <= set(LAWS)          # Warp's rigid friction, its grid
    mass = result["combined"]["box.mass"]
    assert abs(mass["value"] - TRUE_MASS) / TRUE_MASS < 0.05
    if mass["ci95"] is not None:
        assert mass["ci95"][0] <= mass["value"] <= mass["ci95"][1]
        # the combined interval covers every equally good law's, the clip's own among them (measured with the six laws
        # of the earlier default set: [0.85, 1.31] within 2.4 % of the best loss; the best law's own interval alone, [0.977, 0.996], misses 1.0)
        own = next(r for r in table["rows"] if r["label"] == "capped")["estimates"]["box.mass"]
        if own[1] is not None:
            assert mass["ci95"][0] <= own[1] and own[2] <= mass["ci95"][1]
    assert all(r["equally_good"] == (r["label"] in result["equally_good"]) for r in table["rows"])
    assert "contact law uncapped+huber" in out and "Contact laws compared" in open(result["files"]["laws_md"]).read()


def test_fit_with_a_profile_reports_it(clip, tmp_path, capsys):
    """[fit] profile = true: the mass's profile (no other unknown to refit) crosses the threshold on both
    sides near the Gauss-Newton interval, and the report carries it (estimates.json, estimates.md)."""
    folder, _ = clip
    data = _scene("y")
    data["fit"].update(profile=True, profile_points=4)
    (tmp_path / "scene.toml").write_text(_toml(data).replace("frames/", f"{folder}/frames/")
                                         .replace("masks/", f"{folder}/masks/"))
    code, result, out, _ = _run(["fit", tmp_path / "scene.toml", "--out", tmp_path / "fit", "--quick"], capsys)
    assert code == 0 and "profile box.mass = " in out
    with open(result["files"]["estimates_json"]) as fh:
        u = json.load(fh)["unknowns"]["box.mass"]
    p = u["profile"]
    assert p["lower_reason"] == p["upper_reason"] == "threshold" and not p["undetermined"]
    assert u["status"] == "ok" and u["ci95"] == pytest.approx(p["interval"])
    assert u["ci95"][0] <= p["laplace"][0] and p["laplace"][1] <= u["ci95"][1]       # the union
    assert abs(u["estimate"] - TRUE_MASS) / TRUE_MASS < 0.02 and u["ci95"][1] / u["ci95"][0] < 1.5
    assert "Profile likelihood" in open(result["files"]["estimates_md"]).read()


def test_fit_reports_the_step_it_chose(clip, tmp_path, capsys):
    """[simulation] substeps = "auto" (min_substeps = max_substeps = 8: one check, whichever way it goes): the fit
    runs at the step chosen, and the console, estimates.json and estimates.md give the check's figure."""
    folder, _ = clip
    data = _scene("y")
    data["simulation"] = {"substeps": "auto", "min_substeps": 8, "max_substeps": 8}
    (tmp_path / "scene.toml").write_text(_toml(data).replace("frames/", f"{folder}/frames/")
                                         .replace("masks/", f"{folder}/masks/"))
    code, result, out, _ = _run(["fit", tmp_path / "scene.toml", "--out", tmp_path / "fit", "--quick"], capsys)
    assert code == 0
    with open(result["files"]["estimates_json"]) as fh:
        report = json.load(fh)
    step = report["time_step_choice"]
    assert report["substeps"] == step["substeps"] == 8 and len(step["checks"]) == 1
    assert report["dt"] == pytest.approx(1.0 / (FPS * 8)) == pytest.approx(step["dt"])
    assert step["cap_hit"] == (not step["passed"]) == (not step["checks"][0]["passed"])
    assert step["checks"][0]["frames"] == report["frames"]
    assert step["summary"] in out and "time step: 8 steps a frame" in out
    md = open(result["files"]["estimates_md"]).read()
    assert "Time step: substeps = \"auto\" chose 8 steps a frame" in md
    at = step["at_estimate"]          # the check again at the estimate, in the summary either way
    assert at["substeps"] == 8 and at["frames"] == report["frames"]
    assert ("At the estimate the check still passes" if at["passed"] else "AT THE ESTIMATE the check fails") in md
