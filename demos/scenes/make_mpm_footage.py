"""Make a CONTROL footage clip for an MPM scene file with tigradsim's own model: the file's scene, rolled out
at the values the file gives its objects (the [unknowns] initial values are ignored: the truth is what
[objects.NAME] params says), rendered as splat silhouettes by the same path `tigradsim fit` uses
(`tigradsim.scenes.scene_build.Scene`), written as the [footage] masks (8-bit grey, the soft coverage) and
frames (white matter on black).  The frame count is [simulation] duration x fps + 1 (default 15 frames).

    python demos/scenes/make_mpm_footage.py demos/scenes/mpm_jelly.toml [--frames 15]

Fitting that clip recovers the file's values up to the 8-bit quantisation of the masks (a control: no
model error); tests/test_scene_mpm.py checks it through the CLI.

A file with several cameras ([[cameras]], each entry naming its own frames and masks patterns; [footage]
holding the shared fps) gets one clip per camera from the one rollout (`Scene.render_views`).
"""
import argparse
import os
import sys

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:            # pragma: no cover
    import tomli as tomllib


def make_footage(scene_path, frames=15, precision="f64"):
    """Write the masks and frames of `scene_path`'s footage (patterns with %04d: [footage]'s, or each
    [[cameras]] entry's) for `frames` frames; returns the masks (K, H, W) in [0, 1] of the first camera
    (a list of them, one per camera, with [[cameras]])."""
    import tigradsim as tgs
    from tigradsim.io.footage import Footage
    from tigradsim.io.video import save_frames
    from tigradsim.scenes.scene_build import Scene
    from tigradsim.scenes.scene_file import parse_scene

    with open(scene_path, "rb") as fh:
        data = tomllib.load(fh)
    several = "cameras" in data
    shared = dict(data.pop("footage"))
    # the files to write, per camera: [footage]'s, or each [[cameras]] entry's (taken out of the entry)
    targets = ([{k: entry.pop(k) for k in ("frames", "masks")} for entry in data["cameras"]] if several else
               [{k: shared.pop(k) for k in ("frames", "masks")}])
    shared.pop("background", None)
    fps = float(shared["fps"])
    data["unknowns"] = {}                            # the objects' own values: the truth
    data.setdefault("simulation", {})["duration"] = (frames - 1) / fps
    spec = parse_scene(data, scene_path)
    clips = []
    for view in spec.views or [None]:
        cam = spec.camera if view is None else view.camera
        blank = np.zeros((frames, cam.height, cam.width))
        footage = Footage(blank, fps, masks=blank, start_time=float(shared.get("start_time", 0.0)),
                          check_masks=False)
        footage.factor, footage.full_size = 1, (cam.width, cam.height)
        clips.append(footage)
    tgs.init(arch="cpu", precision=precision)
    scene = Scene(spec, clips if several else clips[0], requires_grad=False, unknowns=False)
    videos = [v[..., 0] for v in scene.render_views()]
    base = os.path.dirname(os.path.abspath(scene_path))
    for files, masks in zip(targets, videos):
        for pattern, images in ((files["masks"], masks), (files["frames"], np.repeat(masks[..., None], 3, -1))):
            folder, name = os.path.split(os.path.join(base, pattern))
            save_frames(images, folder, prefix=name.split("_%")[0])
    return videos if several else videos[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scene")
    parser.add_argument("--frames", type=int, default=15)
    args = parser.parse_args(argv)
    masks = make_footage(args.scene, args.frames)
    for m in (masks if isinstance(masks, list) else [masks]):
        print(f"{len(m)} frames, mask area {m.mean(axis=(1, 2)).round(3).tolist()}")


if __name__ == "__main__":
    sys.exit(main())
