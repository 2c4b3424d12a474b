"""Combinatorial problems for RLNS: a feasible set of binary vectors y and a linear objective θᵀy.

A problem tells the sampler three things, all vectorized over a batch of B chains:

* ``n_vars``: the length of y; ``n_units`` and the unit a neighbourhood frees (a position
  for k-subset, a job, with its m assignment variables, for generalized assignment), and
  ``values_per_unit``, how many values a freed unit can take;
* ``block_candidates(Y, S)``: every feasible state that agrees with Y[b] outside the units
  S[b], as full binary states (B, C, n_vars), and a mask (B, C) of the feasible ones (the
  brute-force local solver);
* ``random_feasible(rng, B)`` and ``is_feasible(Y)``; ``violation(y)`` names the
  constraint one state breaks (None when it is feasible), for the error messages;
* ``milp()``: the whole problem's constraints as (A, lower, upper) triples, and
  ``block_milp(y, units)``: the block subproblem's, for the exact MILP solves
  (:func:`~neurips26.combinatorial.exact.solve_binary_milp`).

The objective is maximized: the Gibbs distribution is p(y) ∝ exp(θᵀy / T). For a cost to
minimize, pass θ = −cost.

The constructors check their settings (types, shapes, NaN / inf, and the cheap
conditions without which no feasible solution exists) and raise a ValueError or
TypeError naming the argument; NumPy integers are accepted wherever ints are.
"""

from __future__ import annotations

import itertools
from math import comb

import numpy as np

from .._checks import check_int

__all__ = ["KSubset", "GeneralizedAssignment", "VehicleScheduling"]


def _check_units(S: np.ndarray, B: int, n_units: int) -> np.ndarray:
    S = np.asarray(S)
    if S.ndim != 2 or S.shape[0] != B:
        raise ValueError(f"the neighbourhood must have shape (chains, size) = ({B}, size), got {S.shape}")
    if S.size and (S.min() < 0 or S.max() >= n_units):
        raise ValueError(f"neighbourhood units must be in [0, {n_units}), got {S.min()}..{S.max()}")
    return S


def _check_states(Y: np.ndarray, n_vars: int, name: str = "states") -> np.ndarray:
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] != n_vars:
        raise ValueError(f"{name} must have shape (chains, {n_vars}), got {Y.shape}")
    return Y


def _binary_violation(y: np.ndarray) -> str | None:
    """Which entry of the state y (1-D) is not 0 or 1, or None."""
    bad = np.nonzero(~((y == 0) | (y == 1)))[0]
    if len(bad):
        return f"its entries must be 0 or 1, got {y[bad[0]]!r} at position {bad[0]}"
    return None


def _real_matrix(name: str, value, ndim: int) -> np.ndarray:
    """``value`` as a float array of ``ndim`` dimensions without NaN or inf."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers ({exc})") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf), got {a[~np.isfinite(a)][0]!r}")
    return a


def _find_cycle(n: int, arcs: np.ndarray) -> list[int] | None:
    """A directed cycle among the task arcs (tail, head), as a task list, or None."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for t, h in arcs:
        succ[int(t)].append(int(h))
    state = [0] * n  # 0: unseen, 1: on the stack, 2: done
    for root in range(n):
        if state[root]:
            continue
        path, stack = [root], [iter(succ[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt):] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(succ[nxt]))
    return None


class KSubset:
    """Choose exactly k of n items: y ∈ {0, 1}ⁿ, Σy = k. A unit is one position."""

    def __init__(self, n: int, k: int):
        n = check_int("n", n, 2)
        k = check_int("k", k)
        if not 0 < k < n:
            raise ValueError(f"k must be an integer with 0 < k < n = {n}, got k={k}")
        self.n, self.k = n, k
        self.n_vars = self.n_units = n
        self.values_per_unit = 2
        self._patterns: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"KSubset(n={self.n}, k={self.k})"

    def n_states(self) -> int:
        return comb(self.n, self.k)

    def is_feasible(self, Y) -> np.ndarray:
        Y = _check_states(Y, self.n_vars)
        return np.all((Y == 0) | (Y == 1), axis=1) & (Y.sum(axis=1) == self.k)

    def violation(self, y) -> str | None:
        """The constraint the state y (n,) breaks, in words; None when it is feasible."""
        y = np.asarray(y)
        bad = _binary_violation(y)
        if bad is None and y.sum() != self.k:
            bad = f"the constraint sum(y) = k is violated: sum(y) = {y.sum():g}, k = {self.k}"
        return bad

    def random_feasible(self, rng: np.random.Generator, B: int) -> np.ndarray:
        order = np.argsort(rng.random((B, self.n)), axis=1)
        Y = np.zeros((B, self.n), dtype=np.int8)
        np.put_along_axis(Y, order[:, : self.k], 1, axis=1)
        return Y

    def enumerate(self) -> np.ndarray:
        """All C(n, k) feasible states, in lexicographic order of their chosen sets."""
        out = np.zeros((self.n_states(), self.n), dtype=np.int8)
        for row, chosen in enumerate(itertools.combinations(range(self.n), self.k)):
            out[row, list(chosen)] = 1
        return out

    def _all_patterns(self, b: int) -> np.ndarray:
        if b not in self._patterns:
            self._patterns[b] = ((np.arange(2**b)[:, None] >> np.arange(b)) & 1).astype(np.int8)
        return self._patterns[b]

    def block_candidates(self, Y, S):
        Y = _check_states(Y, self.n_vars)
        S = _check_units(S, len(Y), self.n_units)
        patterns = self._all_patterns(S.shape[1])  # (C, b)
        count = np.take_along_axis(Y, S, axis=1).sum(axis=1)  # ones inside the block: kept
        mask = patterns.sum(axis=1)[None, :] == count[:, None]
        cands = np.repeat(Y[:, None, :], len(patterns), axis=1)
        idx = np.broadcast_to(S[:, None, :], (len(Y), len(patterns), S.shape[1]))
        np.put_along_axis(cands, idx, np.broadcast_to(patterns[None], idx.shape), axis=2)
        return cands, mask


    def milp(self):
        """The global problem's constraints as (A, lower, upper) triples: Σ y = k."""
        return [(np.ones((1, self.n)), float(self.k), float(self.k))]

    def block_milp(self, y, units):
        """The block subproblem of one state as a MILP: (free variable indices, the
        constraints on them as (A, lower, upper)); here Σ_{i∈block} y_i = the block's count."""
        units = np.asarray(units)
        count = float(np.asarray(y)[units].sum())
        return units, [(np.ones((1, len(units))), count, count)]


class GeneralizedAssignment:
    """Assign each of J jobs to one of m agents within capacities: Σ_j w[i, j]·x[i, j] ≤ c[i].

    y is the flattened one-hot (J, m) matrix, y[j·m + i] = 1 when job j goes to agent i, so
    θ has the same layout. A unit is one job (its m variables move together).
    """

    def __init__(self, weights, capacities):
        """``weights`` (agents, jobs) finite and >= 0, ``capacities`` (agents,) finite and
        >= 0; at least one agent and one job. Refused as infeasible (ValueError) when a
        job fits no agent, or when the jobs' lightest weights exceed the total capacity
        (necessary conditions; an instance that passes may still be infeasible, which
        ``random_feasible`` then reports)."""
        w = _real_matrix("weights", weights, 2)
        c = _real_matrix("capacities", capacities, 1)
        if w.shape[0] == 0 or w.shape[1] == 0:
            raise ValueError(f"weights must be (agents, jobs) with at least one agent and one job, got shape {w.shape}")
        if c.shape != (w.shape[0],):
            raise ValueError(f"capacities must have one entry per agent, shape ({w.shape[0]},), got {c.shape}")
        if np.any(w < 0):
            raise ValueError(f"weights must be >= 0, got {w.min():g}")
        if np.any(c < 0):
            raise ValueError(f"capacities must be >= 0, got {c.min():g} (agent {int(np.argmin(c))})")
        fits = w <= c[:, None] + 1e-9
        if not np.all(fits.any(axis=0)):
            j = int(np.nonzero(~fits.any(axis=0))[0][0])
            raise ValueError(f"infeasible instance: job {j} (weights {w[:, j].tolist()}) fits no agent "
                             f"(capacities {c.tolist()})")
        lightest = np.where(fits, w, np.inf).min(axis=0).sum()
        if lightest > c.sum() + 1e-9:
            raise ValueError(f"infeasible instance: the jobs need at least {lightest:g} in total (each at its "
                             f"lightest agent), the capacities sum to {c.sum():g}")
        self.weights, self.capacities = w, c
        self.m, self.J = w.shape
        self.n_vars, self.n_units = self.m * self.J, self.J
        self.values_per_unit = self.m
        self._patterns: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"GeneralizedAssignment(agents={self.m}, jobs={self.J})"

    def assignment(self, Y) -> np.ndarray:
        """(B, J) agent of each job."""
        return _check_states(Y, self.n_vars).reshape(-1, self.J, self.m).argmax(axis=2)

    def one_hot(self, A) -> np.ndarray:
        A = np.asarray(A)
        Y = np.zeros(A.shape + (self.m,), dtype=np.int8)
        np.put_along_axis(Y, A[..., None], 1, axis=-1)
        return Y.reshape(A.shape[:-1] + (self.n_vars,))

    def loads(self, A) -> np.ndarray:
        """(..., m) load of each agent under assignments A (..., J)."""
        A = np.asarray(A)
        onehot = A[..., None] == np.arange(self.m)  # (..., J, m)
        return np.einsum("...jm,mj->...m", onehot, self.weights)

    def is_feasible(self, Y) -> np.ndarray:
        Y = _check_states(Y, self.n_vars)
        blocks = Y.reshape(-1, self.J, self.m)
        one_hot = np.all((Y == 0) | (Y == 1), axis=1) & np.all(blocks.sum(axis=2) == 1, axis=1)
        return one_hot & np.all(self.loads(blocks.argmax(axis=2)) <= self.capacities + 1e-9, axis=1)

    def violation(self, y) -> str | None:
        """The constraint the state y (J·m,) breaks, in words; None when it is feasible."""
        y = np.asarray(y)
        bad = _binary_violation(y)
        if bad is not None:
            return bad
        per_job = y.reshape(self.J, self.m).sum(axis=1)
        if np.any(per_job != 1):
            j = int(np.nonzero(per_job != 1)[0][0])
            return f"job {j} is assigned to {per_job[j]:g} agents (exactly one is required)"
        load = self.loads(y.reshape(self.J, self.m).argmax(axis=1))
        over = np.nonzero(load > self.capacities + 1e-9)[0]
        if len(over):
            i = int(over[0])
            return f"agent {i} is over its capacity: load {load[i]:g} > capacity {self.capacities[i]:g}"
        return None

    def enumerate(self) -> np.ndarray:
        """All feasible states (m^J assignments filtered): for small instances."""
        A = np.array(list(itertools.product(range(self.m), repeat=self.J)), dtype=np.int64)
        A = A[np.all(self.loads(A) <= self.capacities + 1e-9, axis=1)]
        return self.one_hot(A)

    def random_feasible(self, rng: np.random.Generator, B: int, tries: int = 10_000) -> np.ndarray:
        """Random feasible assignments: jobs in random order, each to a random agent with room
        (first fit in random agent order), retried until every chain has one."""
        out = np.zeros((B, self.n_vars), dtype=np.int8)
        for b in range(B):
            for _ in range(tries):
                load = np.zeros(self.m)
                A = np.full(self.J, -1)
                for j in rng.permutation(self.J):
                    for i in rng.permutation(self.m):
                        if load[i] + self.weights[i, j] <= self.capacities[i] + 1e-9:
                            A[j], load[i] = i, load[i] + self.weights[i, j]
                            break
                    else:
                        break
                if np.all(A >= 0):
                    out[b] = self.one_hot(A[None])[0]
                    break
            else:
                raise RuntimeError(f"no feasible assignment found in {tries} random tries: is the instance feasible?")
        return out

    def block_candidates(self, Y, S):
        A = self.assignment(Y)
        S = _check_units(S, len(A), self.n_units)
        b = S.shape[1]
        if b not in self._patterns:
            self._patterns[b] = np.array(list(itertools.product(range(self.m), repeat=b)), dtype=np.int64)
        patterns = self._patterns[b]  # (C, b) agents of the freed jobs
        B, C = len(A), len(patterns)
        cands = np.repeat(A[:, None, :], C, axis=1)
        idx = np.broadcast_to(S[:, None, :], (B, C, b))
        np.put_along_axis(cands, idx, np.broadcast_to(patterns[None], idx.shape), axis=2)
        mask = np.all(self.loads(cands) <= self.capacities + 1e-9, axis=2)
        return self.one_hot(cands), mask

    def milp(self):
        """The global problem's constraints as (A, lower, upper) triples over the J·m
        job-major variables: one agent per job, and Σ_j w[i, j]·y[j·m + i] ≤ c[i] for each
        agent."""
        one_per_job = np.kron(np.eye(self.J), np.ones(self.m))  # (J, J·m)
        capacity = np.zeros((self.m, self.n_vars))
        for i in range(self.m):
            capacity[i, i::self.m] = self.weights[i]
        return [(one_per_job, 1, 1), (capacity, -np.inf, self.capacities)]

    def block_milp(self, y, units):
        """The block subproblem of one state as a MILP over the freed jobs' m variables
        each: one agent per freed job, and each agent's capacity minus the load of the jobs
        that stay."""
        units = np.asarray(units)
        A = self.assignment(np.asarray(y)[None])[0]
        stay = np.ones(self.J, dtype=bool)
        stay[units] = False
        residual = self.capacities - self.loads(np.where(stay, A, -1)[None])[0]
        free = (units[:, None] * self.m + np.arange(self.m)[None, :]).reshape(-1)  # job-major variables
        b = len(units)
        one_agent = np.kron(np.eye(b), np.ones(self.m))
        capacity = np.zeros((self.m, b * self.m))
        for i in range(self.m):
            capacity[i, i::self.m] = self.weights[i, units]
        return free, [(one_agent, 1.0, 1.0), (capacity, -np.inf, residual + 1e-9)]


class VehicleScheduling:
    """Path covers of a task graph: every task gets exactly one predecessor (another task or
    the depot) and one successor (another task or the depot), along given arcs.

    ``arcs`` is a list of (tail, head): tail a task index or ``SOURCE`` (−1), head a task
    index or ``SINK`` (−2); a task needs at least its source and its sink arc. y has one
    binary per arc. A unit is a task: a neighbourhood frees every arc touching its tasks,
    and the source / sink arcs of their current neighbours, and re-optimizes them keeping
    every degree at one. The subproblem is a MILP (use ``MILPLocalSolver``); its feasible
    completions are not enumerated, so entropic sampling is not offered here.
    """

    SOURCE, SINK = -1, -2

    def __init__(self, n_tasks: int, arcs):
        """``n_tasks`` >= 1; ``arcs`` (n_arcs, 2) integer pairs. Refused (ValueError): an
        arc from a task to itself or from SOURCE to SINK, arcs among the tasks that form a
        cycle (a solution's degree-one arcs could then close a loop that is no route), a
        task without its source or sink arc."""
        n_tasks = check_int("n_tasks", n_tasks, 1)
        raw = np.asarray(arcs)
        if raw.ndim != 2 or raw.shape[1] != 2:
            raise ValueError(f"arcs must be (n_arcs, 2) pairs (tail, head), got shape {raw.shape}")
        if raw.dtype.kind not in "iu":
            try:
                as_float = raw.astype(float)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"arcs must hold integers (task indices, -1, -2) ({exc})") from None
            if not np.all(np.isfinite(as_float) & (as_float == np.round(as_float))):
                bad = as_float[~(np.isfinite(as_float) & (as_float == np.round(as_float)))][0]
                raise ValueError(f"arcs must hold integers (task indices, -1, -2), got {bad!r}")
        arcs = raw.astype(np.int64)
        tails, heads = arcs[:, 0], arcs[:, 1]
        bad_tail = (tails < -1) | (tails >= n_tasks)
        bad_head = ((heads < 0) & (heads != -2)) | (heads >= n_tasks)
        if np.any(bad_tail | bad_head):
            a = int(np.nonzero(bad_tail | bad_head)[0][0])
            raise ValueError(f"arc {tuple(arcs[a].tolist())}: arc tails must be tasks 0..{n_tasks - 1} or SOURCE (-1), "
                             f"heads tasks or SINK (-2)")
        loops = (tails == heads) | ((tails == -1) & (heads == -2))
        if np.any(loops):
            a = tuple(arcs[np.nonzero(loops)[0][0]].tolist())
            raise ValueError(f"arc {a} joins a task or the depot to itself")
        cycle = _find_cycle(n_tasks, arcs[(tails >= 0) & (heads >= 0)])
        if cycle is not None:
            raise ValueError(f"arcs among the tasks must not form a cycle (tasks are done in time order), "
                             f"found the cycle {' -> '.join(map(str, cycle))}")
        for t in range(n_tasks):
            if not np.any((tails == -1) & (heads == t)) or not np.any((tails == t) & (heads == -2)):
                raise ValueError(f"task {t} needs its source arc (-1, {t}) and its sink arc ({t}, -2)")
        self.n_tasks, self.arcs = n_tasks, arcs
        self.n_vars, self.n_units = len(arcs), n_tasks
        self.values_per_unit = None  # not enumerable
        # incidence: in_of[t] / out_of[t] list the arcs entering / leaving task t
        self.into = np.zeros((n_tasks, len(arcs)))
        self.out = np.zeros((n_tasks, len(arcs)))
        self.into[heads[heads >= 0], np.nonzero(heads >= 0)[0]] = 1
        self.out[tails[tails >= 0], np.nonzero(tails >= 0)[0]] = 1

    def __repr__(self) -> str:
        return f"VehicleScheduling(tasks={self.n_tasks}, arcs={len(self.arcs)})"

    def is_feasible(self, Y) -> np.ndarray:
        Y = _check_states(Y, self.n_vars)
        binary = np.all((Y == 0) | (Y == 1), axis=1)
        return binary & np.all(Y @ self.into.T == 1, axis=1) & np.all(Y @ self.out.T == 1, axis=1)

    def violation(self, y) -> str | None:
        """The constraint the state y (n_arcs,) breaks, in words; None when it is feasible."""
        y = np.asarray(y)
        bad = _binary_violation(y)
        if bad is not None:
            return bad
        for inc, what in ((self.into, "predecessors"), (self.out, "successors")):
            deg = inc @ y
            if np.any(deg != 1):
                t = int(np.nonzero(deg != 1)[0][0])
                return f"task {t} has {deg[t]:g} {what} (exactly one is required)"
        return None

    def random_feasible(self, rng: np.random.Generator, B: int) -> np.ndarray:
        """One vehicle per task (always feasible)."""
        y = ((self.arcs[:, 0] == -1) | (self.arcs[:, 1] == -2)).astype(np.int8)
        return np.repeat(y[None], B, axis=0)

    def block_candidates(self, Y, S):
        raise TypeError("vehicle scheduling blocks are re-optimized by MILP: use MILPLocalSolver with an argmax "
                        "regularizer (Perturbed or Greedy)")

    def milp(self):
        """The global problem's constraints as (A, lower, upper) triples: all degrees one."""
        return [(self.into, 1.0, 1.0), (self.out, 1.0, 1.0)]

    def block_milp(self, y, units):
        y = np.asarray(y)
        tails, heads = self.arcs[:, 0], self.arcs[:, 1]
        U = np.zeros(self.n_tasks, dtype=bool)
        U[np.asarray(units)] = True
        touching = (tails >= 0) & U[np.maximum(tails, 0)] | (heads >= 0) & U[np.maximum(heads, 0)]
        used = y.astype(bool)
        # the current neighbours of the block: their arcs into / out of the block are freed,
        # so their depot arcs are freed too (a neighbour may become a route's end or start)
        nbr = np.zeros(self.n_tasks, dtype=bool)
        nbr[heads[used & touching & (heads >= 0)]] = True
        nbr[tails[used & touching & (tails >= 0)]] = True
        depot = ((tails == -1) & nbr[np.maximum(heads, 0)] & (heads >= 0)) | \
                ((heads == -2) & nbr[np.maximum(tails, 0)] & (tails >= 0))
        free = np.nonzero(touching | depot)[0]
        fixed = np.setdiff1d(np.arange(self.n_vars), free)
        constraints = []
        for inc in (self.into, self.out):
            rows = np.nonzero(inc[:, free].any(axis=1))[0]
            rhs = 1.0 - inc[np.ix_(rows, fixed)] @ y[fixed]
            constraints.append((inc[np.ix_(rows, free)], rhs, rhs))
        return free, constraints
