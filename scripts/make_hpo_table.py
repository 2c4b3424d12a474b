"""Build the offline HPO table used by ``neurips26 run gpucb-stopping``: 5-fold
cross-validated accuracy of an RBF SVM on scikit-learn's bundled digits over a 15 × 15 grid
of (log10 C, log10 gamma). Each row holds the mean accuracy over folds and the variance of
the fold accuracies (the emulator's observation noise). Deterministic (fixed folds).

    python scripts/make_hpo_table.py [--out src/neurips26/reproduce/data/svm_digits_grid.csv]
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.svm import SVC

from neurips26._atomic import atomic_write_text

LOG_C = np.linspace(-2, 4, 15)
LOG_GAMMA = np.linspace(-6, -1, 15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="src/neurips26/reproduce/data/svm_digits_grid.csv")
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["log10_C", "log10_gamma", "accuracy", "fold_variance"])
    for lc, lg in itertools.product(LOG_C, LOG_GAMMA):
        acc = cross_val_score(SVC(C=10**lc, gamma=10**lg), X, y, cv=folds)
        w.writerow([f"{lc:.6f}", f"{lg:.6f}", f"{acc.mean():.6f}", f"{acc.var(ddof=1):.8f}"])
    atomic_write_text(args.out, buf.getvalue())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
