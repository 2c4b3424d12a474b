"""Combinatorial optimization: RLNS (regularized large neighbourhood search) as an MCMC
sampler over feasible solutions, and Fenchel–Young losses learned through it."""

from .exact import (empirical_distribution, gibbs, is_irreducible, ksubset_log_partition, ksubset_marginals,
                    solve_binary_milp, tv_distance)
from .fenchel_young import FenchelYoungLoss, exact_fenchel_young_ksubset
from .problems import GeneralizedAssignment, KSubset, VehicleScheduling
from .rlns import (RLNS, BruteForceLocalSolver, Entropic, Greedy, IncompatibleComponentsError, MILPLocalSolver, Perturbed,
                   RandomBlock)

__all__ = ["RLNS", "RandomBlock", "BruteForceLocalSolver", "MILPLocalSolver", "Entropic", "Perturbed", "Greedy", "KSubset",
           "GeneralizedAssignment", "VehicleScheduling", "FenchelYoungLoss", "exact_fenchel_young_ksubset", "gibbs", "is_irreducible",
           "tv_distance", "empirical_distribution", "ksubset_log_partition", "ksubset_marginals",
           "solve_binary_milp", "IncompatibleComponentsError"]
