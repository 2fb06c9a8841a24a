"""The cloth clip in the coverage measurement (benchmarks/coverage.py): the scene file a user writes for
warp_cloth_sphere (a cloth dropped over a ball, motion by Warp 1.9.1: benchmarks/interacting_sims.py), from
truth.json's user-side facts only: the cloth's rest mesh (its initial pose, at rest), its total mass (weighed)
and half-thickness (the contact radius), the ball's centre and radius, the camera and the ground plane.  The
unknowns are the membrane mu, lam, the bending stiffness and the membrane damping, started at round guesses; [ground] states
tigradsim's documented light-cloth contact (ke, kd, kf: interacting_footage.CLOTH_GROUND_GUESS, none of Warp's;
the library's defaults are past the explicit limit of 0.14 g vertices) and no mu, which [fit] contact_constants
handles ("nuisance": fitted within [0.1, 1]; "assume": held at 0.5, the intervals widened by its effect).  The
truth stays in truth.json, read only to score.
"""
from __future__ import annotations

import json
import os

from footage import FOOTAGE, noisy_folder, write_clip_scene
from interacting_footage import CLOTH_FIT, CLOTH_GROUND_GUESS, CLOTH_SUBSTEPS

GUESS = {"cloth.mu": 20.0, "cloth.lam": 50.0, "cloth.bending": 3e-3, "cloth.damping": 0.1}    # the scene.toml's
BOUNDS = {"cloth.mu": (2.0, 300.0), "cloth.lam": (2.0, 300.0), "cloth.bending": (1e-5, 0.1), "cloth.damping": (5e-3, 2.0)}


def is_cloth_clip(truth) -> bool:
    return "cloth" in truth.get("objects", {})


def cloth_settings(quick):
    """[simulation] and [fit]: interacting_footage.py's (64 steps per frame, 64 px), fewer iterations with quick."""
    fit = {k: v for k, v in CLOTH_FIT.items()}
    if quick:
        fit.update(iterations=15, polish=8, refine=5)
    return {"substeps": CLOTH_SUBSTEPS}, fit


def make_cloth_scene(clip, variant, contact, scene_dir, out, quick):
    """Write scene_dir/scene.toml for the cloth clip; returns (path, truths)."""
    folder = os.path.join(FOOTAGE, clip)
    truth = json.load(open(os.path.join(folder, "truth.json")))
    frames_folder = noisy_folder(clip, out) if variant == "noisy" else folder
    rel = lambda p: os.path.relpath(p, scene_dir)
    cloth, sphere = truth["objects"]["cloth"], truth["colliders"]["sphere"]
    sim, fit = cloth_settings(quick)
    tables = [("[world]", {"up": "y", "gravity": -float(truth["world"]["gravity"][1])}), ("[simulation]", sim),
              ("[ground]", dict(CLOTH_GROUND_GUESS)),
              ("[colliders.sphere]", {"kind": "sphere", "position": sphere["position"], "radius": sphere["radius"]}),
              ("[objects.cloth]", {"type": "cloth", "mesh": rel(os.path.join(folder, cloth["mesh"])),
                                   "material": "membrane",
                                   "params": {"mu": GUESS["cloth.mu"], "lam": GUESS["cloth.lam"]},
                                   "bending": GUESS["cloth.bending"], "damping": GUESS["cloth.damping"],
                                   "mass": cloth["mass"],
                                   "radius": cloth["contact_radius"]})]
    path = write_clip_scene(tables, truth, variant, fit, contact, folder, frames_folder, scene_dir, GUESS, BOUNDS)
    return path, cloth_truths(truth)


def cloth_truths(truth):
    """The true values of the cloth clip's estimates: tigradsim's membrane mu, lam and bending per edge (Warp's
    tri_ke, tri_ka and edge_ke x cell, as truth.json's objects.cloth.material_conversion says)."""
    t = truth["truth"]
    return {"cloth.mu": float(t["cloth.mu"]), "cloth.lam": float(t["cloth.lam"]),
            "cloth.bending": float(t["cloth.bending"]), "cloth.damping": float(t["cloth.damping"])}
