"""Capacity planning: the cheapest deployment that meets latency SLOs (``simllm-plan``).

Pure search logic, no Hydra or MLflow (runner/tools/plan.py composes, launches and tracks):

- ``spec``   PlanSpec: SLOs, the stability rule of one DES measurement, the search precision,
             the deployment space, the target rate, prices and the ranking objective;
- ``space``  candidate deployments (hardware x partition x serving mode), validity per model;
- ``bound``  analytical pruning from the step model: memory fit, zero-load SLO feasibility and a
             fluid-model capacity estimate (ordering, the first bracket, pruning by bound);
- ``stats``  the SLO verdict of one run with its binomial (order-statistic) confidence interval;
- ``probe``  one arrival rate -> DES runs (request count doubled while the verdict is uncertain);
- ``auto_tp`` the TP degree of a deployment that does not state it (weights leave half of HBM);
- ``search`` bracketing + geometric bisection on the arrival rate to a stated precision, and the
             brute-force grid it is checked against;
- ``rank``   cost, energy, replicas for a target rate, the Pareto frontier and the ranking;
- ``requirements`` the inverse question: the least spec-sheet figures (per axis, and the frontier
             of two) meeting the SLOs at a target rate, and the spec elasticities.
"""

from engine.plan.spec import PlanSpec, SloSpec, RuleSpec, SpaceSpec
from engine.plan.space import Candidate, enumerate_candidates
from engine.plan.auto_tp import auto_tp
from engine.plan.search import SearchResult, bisect, brute_force, find_max_rate, geometric_grid
from engine.plan.stats import order_stat_ci, verdict

__all__ = ["PlanSpec", "SloSpec", "RuleSpec", "SpaceSpec", "Candidate", "enumerate_candidates",
           "SearchResult", "auto_tp", "bisect", "find_max_rate", "brute_force", "geometric_grid", "order_stat_ci",
           "verdict"]
