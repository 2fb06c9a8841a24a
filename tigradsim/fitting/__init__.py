"""Fitting: losses, parameters and optimizers, gradient checks, video fits, identification,
uncertainty and control."""
