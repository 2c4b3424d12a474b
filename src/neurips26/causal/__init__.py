"""Continuous DAG learning for linear SEMs: NOTEARS / GOLEM / DAGMA objectives and DAG-flow,
exact regularization-path following."""

from .dagflow import (DagFlow, PathEvent, RegularizationPath, follow_path, is_acyclic, local_minimum, make_acyclic,
                      refit_bic, select_by_bic)
from .objectives import DagmaObjective, GolemObjective, NotearsObjective, SEMObjective, check_data, dagma_h, notears_h

__all__ = ["DagFlow", "make_acyclic", "refit_bic", "select_by_bic", "PathEvent", "RegularizationPath", "follow_path", "local_minimum",
           "is_acyclic", "DagmaObjective", "GolemObjective",
           "NotearsObjective", "SEMObjective", "check_data", "dagma_h", "notears_h"]
