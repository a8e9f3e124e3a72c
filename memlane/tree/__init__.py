"""The temporal memory tree (TiMem): sessions, days, weeks and a profile consolidated over a
bank's memory units, and recall that climbs it as far as a question needs.

Modules by job: ``model`` (levels, nodes, ids), ``windows`` (which window a unit falls in and
when a window closes), ``consolidators`` (extractive rules and the LLM), ``build`` (plan and
write a bank's tree bottom up, idempotent), ``invariants`` (the checks tests and the doctor
run), ``planner`` (a query's complexity and levels) and ``recall`` (hierarchical recall).
"""

from memlane.tree.nodes import LEVEL_NAMES, Level, TreeNode, node_id, parse_level

__all__ = ["LEVEL_NAMES", "Level", "TreeNode", "node_id", "parse_level"]
