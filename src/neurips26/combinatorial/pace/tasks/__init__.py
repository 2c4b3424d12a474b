"""PACE's tasks: each problem's states, edits, Γ_I (``transition``) and Comp_I (``complete``)."""

from .atsp import ATSPInstance, ATSPState, ATSPTask, or_opt
from .cvrp import CVRPInstance, CVRPState, CVRPTask, canonical_routes, routes_cost
from .maxcut import MaxCutState, MaxCutTask, cut_size, one_flip
from .mcl import MaxCliqueTask
from .mis import Graph, MISState, MISTask, one_two_swaps
from .mvc import MVCTask
from .tsp import TSPInstance, TSPState, TSPTask, tour_length, two_opt

TASKS = {"tsp": TSPTask, "atsp": ATSPTask, "cvrp": CVRPTask, "mis": MISTask, "mvc": MVCTask, "mcl": MaxCliqueTask,
         "maxcut": MaxCutTask}

__all__ = ["MaxCutState", "MaxCutTask", "cut_size", "one_flip", "ATSPInstance", "ATSPState", "ATSPTask", "or_opt",
           "CVRPInstance", "CVRPState", "CVRPTask", "canonical_routes", "routes_cost", "TSPInstance", "TSPState",
           "TSPTask", "tour_length", "two_opt", "Graph", "MISState", "MISTask", "one_two_swaps", "MVCTask",
           "MaxCliqueTask", "TASKS"]
