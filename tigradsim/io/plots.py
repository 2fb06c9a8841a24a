"""Matplotlib figures of an optimisation: loss curve and parameter traces."""
import numpy as np


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_loss(history, path, title="loss"):
    """Loss per iteration on a log scale, written to `path` (PNG)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    loss = np.asarray(history.loss)
    ax.semilogy(np.arange(len(loss)), np.maximum(loss, 1e-300), lw=1.8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_params(history, path, truth=None, title="parameters"):
    """One panel per parameter (scalar ones, or the mean of arrays), with the
    true value as a dashed line where `truth` (name -> value) gives it."""
    plt = _pyplot()
    names = list(history.params)
    fig, axes = plt.subplots(len(names), 1, figsize=(5, 1.8 + 1.6 * len(names)), dpi=120, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        values = np.array([np.mean(v) for v in history.params[name]])
        ax.plot(values, lw=1.8, label="estimate")
        if truth and name in truth:
            ax.axhline(float(np.mean(truth[name])), ls="--", color="k", lw=1, label="true")
            ax.legend(loc="best", fontsize=8)
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("iteration")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
