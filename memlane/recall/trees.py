"""LightGBM text models (``Booster.save_model``) scored with numpy alone: the learned ranker
(memlane/recall/learned.py) reads its models without importing lightgbm, which imports
scikit-learn and SciPy: 1 s or more of every CLI recall (``python -m benchmarks.ranker_eval``
has the figures). The scores are LightGBM's raw scores (``Booster.predict(X)``), the same to
1e-9 (tests/memlane/test_trees.py).

Numerical splits only (the shipped models have none other; a file with a categorical split,
a linear tree or more than one class is refused with a ValueError). A split sends a row left
when its value is ``<= threshold``, except a missing one, which goes to the split's default
side. What is missing follows the split's missing type: NaN for type NaN; zero or NaN for type
Zero; nothing for type None, where NaN is read as 0 and compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

# LightGBM's kZeroThreshold: values within it are zero (a dense row drops them, and a Zero
# missing type takes them as missing).
ZERO = 1e-35
_DEFAULT_LEFT = 2  # decision_type bit 1; bit 0 is categorical, bits 2-3 the missing type
_NONE, _ZERO, _NAN = 0, 1, 2


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Forest:
    """Every tree's nodes in flat arrays, one node numbering across the trees.

    Each split reads one column of :func:`_views` (its feature, as its missing type and default
    side see it), so a step of the walk is a few array operations over every (tree, row) at
    once, with no per-row test for a missing value. A leaf's children are itself: a walk of as
    many steps as a tree is deep ends at each row's leaf. Trees are walked deepest first
    (``active``: how many still walk at each step): on the shipped models 3,215 tree-steps
    instead of 300 trees x 18 steps (5,400)."""

    feature_names: tuple[str, ...]
    roots: np.ndarray  # (trees,) root node of each tree, deepest tree first
    tree_order: np.ndarray  # (trees,) where each tree (file order) is in ``roots``
    column: np.ndarray  # (nodes,) column of the views a split reads
    threshold: np.ndarray  # (nodes,)
    children: np.ndarray  # (2 * nodes,) node 2i: right child of i, 2i + 1: left child
    value: np.ndarray  # (nodes,) a leaf's output (shrinkage applied), 0 for a split
    active: tuple[int, ...]  # per step, the number of leading trees of ``roots`` not at a leaf

    @classmethod
    def load(cls, path: Path) -> Forest:
        return cls.parse(path.read_text())

    @classmethod
    def parse(cls, text: str) -> Forest:
        head, _, rest = text.partition("\nTree=")
        header = _fields(head)
        if header.get("num_class", "1") != "1" or header.get("num_tree_per_iteration", "1") != "1":
            raise ValueError("a multiclass LightGBM model: only one output is scored")
        if "feature_names" not in header:
            raise ValueError("not a LightGBM text model: no feature_names line")
        names = tuple(header["feature_names"].split())
        blocks = rest.split("end of trees")[0].split("\nTree=") if rest else []
        trees = [_tree(_fields(b), len(names)) for b in blocks]
        offsets = np.cumsum([0] + [len(t.value) for t in trees])[:-1]
        depths = np.array([t.depth for t in trees], dtype=np.int64)
        deepest = np.argsort(-depths, kind="stable")

        def joined(key: str, shift: bool = False) -> np.ndarray:
            return np.concatenate([getattr(t, key) + (o if shift else 0) for t, o in zip(trees, offsets)])

        if not trees:
            empty = np.zeros(0, dtype=np.int64)
            return cls(names, empty, empty, empty, np.zeros(0), empty, np.zeros(0), ())
        column = joined("feature") + len(names) * joined("view")
        children = np.stack([joined("right", True), joined("left", True)], axis=1).ravel()
        return cls(
            feature_names=names,
            roots=offsets[deepest].astype(np.int64),
            tree_order=np.argsort(deepest),
            column=column,
            threshold=joined("threshold"),
            children=children,
            value=joined("value"),
            active=tuple(int((depths > step).sum()) for step in range(int(depths.max()))),
        )

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The raw score of each row of ``X`` (rows x features, NaN where missing): the sum of
        the trees' leaf values in tree order, as LightGBM adds them."""
        X = np.asarray(X, dtype=np.float64)
        if len(X) == 0 or len(self.roots) == 0:
            return np.zeros(len(X))
        if X.ndim != 2 or X.shape[1] != len(self.feature_names):
            raise ValueError(f"expected rows of {len(self.feature_names)} features, got shape {X.shape}")
        views = _views(X)
        flat = views.ravel()
        base = np.arange(len(X)) * views.shape[1]
        node = np.repeat(self.roots[:, None], len(X), axis=1)  # (trees, rows)
        for m in self.active:
            at = node[:m]
            left = flat[self.column[at] + base] <= self.threshold[at]
            node[:m] = self.children[2 * at + left]
        # cumsum adds tree after tree, in file order: LightGBM's sum to the last bit
        return np.cumsum(self.value[node][self.tree_order], axis=0)[-1]


def _views(X: np.ndarray) -> np.ndarray:
    """``X`` as each kind of split reads it, side by side (columns ``view * features +
    feature``), with a missing value made one that ``<= threshold`` sends to the default side:
    -inf goes left, NaN right. View 0: missing type None (NaN read as 0); 1 and 2: NaN, default
    left and right; 3 and 4: Zero (NaN and 0 missing), default left and right."""
    X = np.where(np.abs(X) <= ZERO, 0.0, X)  # as a dense row reaches LightGBM's trees
    nan = np.isnan(X)
    zero = nan | (X == 0)
    inf = -np.inf
    return np.hstack(
        [np.where(nan, 0.0, X), np.where(nan, inf, X), X, np.where(zero, inf, X), np.where(zero, np.nan, X)]
    )


def _fields(block: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in block.splitlines() if "=" in line)


def _numbers(f: dict[str, str], key: str, dtype: type) -> np.ndarray:
    return np.array(f[key].split(), dtype=dtype) if f.get(key, "").strip() else np.zeros(0, dtype)


class _Tree(NamedTuple):
    """One tree's nodes, numbered from 0: its splits, then its leaves."""

    feature: np.ndarray
    view: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int


def _tree(f: dict[str, str], n_features: int) -> _Tree:
    """One ``Tree=`` block (a split's child ``< 0`` names leaf ``~child``)."""
    if int(f.get("num_cat", "0")) or f.get("is_linear", "0") != "0":
        raise ValueError("a LightGBM model with categorical splits or linear trees: not supported")
    leaves = _numbers(f, "leaf_value", np.float64)
    if len(leaves) != int(f["num_leaves"]):
        raise ValueError(f"a tree of {f['num_leaves']} leaves lists {len(leaves)} leaf values")
    splits = len(leaves) - 1
    feature = _numbers(f, "split_feature", np.int64)
    decision = _numbers(f, "decision_type", np.int64)
    if (decision & 1).any():
        raise ValueError("a LightGBM model with categorical splits: not supported")
    if len(feature) and (feature.max() >= n_features or feature.min() < 0):
        raise ValueError("a split reads a feature the model does not name")
    missing, default_left = (decision >> 2) & 3, (decision & _DEFAULT_LEFT) != 0
    view = np.where(missing == _NONE, 0, np.where(missing == _NAN, 2, 4) - default_left)
    own = np.arange(splits, splits + len(leaves))

    def child(key: str) -> np.ndarray:
        c = _numbers(f, key, np.int64)
        return np.concatenate([np.where(c < 0, splits + ~c, c), own])

    left, right = child("left_child"), child("right_child")
    depth, frontier = 0, [0] if splits else []
    while frontier:
        depth += 1
        frontier = [c for s in frontier for c in (left[s], right[s]) if c < splits]
    pad = np.zeros(len(leaves), np.int64)
    return _Tree(
        np.concatenate([feature, pad]),
        np.concatenate([view, pad]),
        np.concatenate([_numbers(f, "threshold", np.float64), np.zeros(len(leaves))]),
        left,
        right,
        np.concatenate([np.zeros(splits), leaves]),
        depth,
    )
