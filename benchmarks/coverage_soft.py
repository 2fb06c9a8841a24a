"""Soft-body clips in the coverage measurement (benchmarks/coverage.py): the scene file a user writes for
a soft clip another engine made (warp_soft_drop: benchmarks/engine_sims.py), from truth.json's user-side
facts only: the engine's tet mesh (TetGen files), its node masses as that engine defines them (Warp's
add_soft_grid: every node density x cell volume, so `node_mass`, one number), the damping form and
value the user set in that engine (Warp's k_damp: tigradsim's damping_model "warp"), the initial pose
and velocity, the camera and the ground plane.  [ground] states no contact constant and no law; the
unknowns are the material's mu and lam (tigradsim's neo_hookean, which is Warp's k_mu / k_lambda),
started at the same round guesses for every soft clip; the contact constants are handled by [fit]
contact_constants as for the boxes.  The truth stays in truth.json, read only to score.
"""
from __future__ import annotations

import json
import os

from footage import FOOTAGE, SETTINGS, noisy_folder, write_clip_scene

GUESS = {"cube.mu": 1500.0, "cube.lam": 3000.0}    # round guesses, the same for every soft clip
BOUNDS = {"cube.mu": (100.0, 1e5), "cube.lam": (100.0, 1e5)}


def soft_settings(quick):
    """[simulation] and [fit] of a soft drop: footage.py's soft_drop settings (112 steps per frame,
    horizons 12 then 24 frames, 8 starts), fewer iterations with quick."""
    sim = dict(SETTINGS["soft_drop"]["simulation"])
    fit = dict(SETTINGS["soft_drop"]["fit"])
    if quick:
        fit.update(iterations=20, polish=10, starts=4, refine=6)
    return sim, fit


def make_soft_scene(clip, variant, contact, scene_dir, out, quick):
    """Write scene_dir/scene.toml for a soft clip; returns (path, truths)."""
    folder = os.path.join(FOOTAGE, clip)
    truth = json.load(open(os.path.join(folder, "truth.json")))
    frames_folder = noisy_folder(clip, out) if variant == "noisy" else folder
    rel = lambda p: os.path.relpath(p, scene_dir)
    obj = truth["object"]
    pose, vel = obj["initial_pose"], obj["initial_velocity"]
    known = truth["known"]
    sim, fit = soft_settings(quick)
    body = {"type": "soft", "tetgen": rel(os.path.join(folder, obj["mesh"]["node"])), "material": "neo_hookean",
            "params": {"mu": GUESS["cube.mu"], "lam": GUESS["cube.lam"]},
            "node_mass": float(known["node_mass"]), "damping": float(known["damping"]),
            "damping_model": known["damping_model"], "radius": float(obj["particle_radius"]),
            "position": pose["position"], "rotation": pose["quaternion_xyzw"], "velocity": vel["linear"]}
    if any(vel["angular"]):
        body["angular_velocity"] = vel["angular"]
    tables = [("[world]", {"up": "y", "gravity": -float(truth["world"]["gravity"][1])}), ("[simulation]", sim),
              ("[ground]", {}),                       # no contact constant, no law
              ("[objects.cube]", body)]
    path = write_clip_scene(tables, truth, variant, fit, contact, folder, frames_folder, scene_dir, GUESS, BOUNDS)
    return path, soft_truths(truth)


def soft_truths(truth):
    """The true values of a soft clip's estimates: tigradsim's neo_hookean mu and lam (the engine's own
    parameters converted as truth.json's object.material_conversion says)."""
    return {"cube.mu": float(truth["truth"]["mu"]), "cube.lam": float(truth["truth"]["lam"])}
