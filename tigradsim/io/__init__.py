"""Input and output: meshes and mesh files, video and footage, plots, panels and the viewer."""
