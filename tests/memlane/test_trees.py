"""LightGBM text models scored with numpy (memlane/recall/trees.py): a model written out by
hand whose scores are worked out by hand (missing values on each kind of split), the shipped
models' scores on recorded recall rows equal to LightGBM's own, and the learned ranker scoring
without lightgbm, scikit-learn or SciPy imported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memlane.recall.learned import MODELS
from memlane.recall.trees import Forest

ROOT = Path(__file__).resolve().parents[2]
# Feature rows of the sample questions' candidates (tests/memlane/data/record_ranker_rows.py):
# 640 rows, 13% NaN (the channels that did not find a candidate, the absent neighbours, ...).
ROWS = Path(__file__).resolve().parent / "data" / "ranker_rows.npz"

# Tree 0: a <= 0.5 -> 1, else 2; NaN is missing (decision_type 10: NaN type, default left).
# Tree 1: b <= -0.5 (decision_type 2: missing type None, so NaN is read as 0 and compared,
#   whatever the default-left bit says) -> then a <= 1 -> 0.25, else 0.5, where a zero or NaN
#   a is missing (decision_type 4: Zero type, default right) -> 0.5; b > -0.5 -> 0.125.
# Tree 2: one leaf, -0.0625.
TINY = """tree
version=v4
num_class=1
num_tree_per_iteration=1
label_index=0
max_feature_idx=1
objective=regression
feature_names=a b
feature_infos=[0:2] [-3:5]

Tree=0
num_leaves=2
num_cat=0
split_feature=0
threshold=0.5
decision_type=10
left_child=-1
right_child=-2
leaf_value=1 2
shrinkage=1

Tree=1
num_leaves=3
num_cat=0
split_feature=1 0
threshold=-0.5 1
decision_type=2 4
left_child=1 -1
right_child=-3 -2
leaf_value=0.25 0.5 0.125
shrinkage=1

Tree=2
num_leaves=1
num_cat=0
leaf_value=-0.0625
shrinkage=1

end of trees
"""
nan = np.nan
TINY_ROWS = np.array(
    [
        [0.3, -1.0],  # 1 + 0.25 - 0.0625
        [nan, nan],  # a NaN goes left: 1; b NaN reads 0 > -0.5: 0.125
        [0.0, 5.0],  # 1 + 0.125
        [0.0, -3.0],  # a = 0 is missing in tree 1, default right: 1 + 0.5
        [nan, -3.0],  # NaN on a Zero-type split reads 0, missing: 1 + 0.5
        [2.0, -1.0],  # 2 + 0.5
        [0.5, -0.5],  # equal to the threshold goes left, twice: 1 + 0.25
        [0.9, nan],  # 2 + 0.125
    ]
)
TINY_SCORES = [1.1875, 1.0625, 1.0625, 1.4375, 1.4375, 2.4375, 1.1875, 2.0625]


def test_a_model_written_by_hand_scores_as_worked_out_by_hand() -> None:
    forest = Forest.parse(TINY)
    assert forest.feature_names == ("a", "b")
    assert forest.scores(TINY_ROWS).tolist() == TINY_SCORES
    assert forest.scores(np.zeros((0, 2))).shape == (0,)


def test_rows_of_the_wrong_width_and_categorical_splits_are_refused() -> None:
    with pytest.raises(ValueError, match="rows of 2 features"):
        Forest.parse(TINY).scores(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="categorical"):
        Forest.parse(TINY.replace("num_leaves=2\nnum_cat=0", "num_leaves=2\nnum_cat=1"))


@pytest.mark.parametrize("path", sorted(MODELS.glob("ranker-*.txt")), ids=lambda p: p.name)
def test_the_shipped_models_score_as_lightgbm_does(path: Path) -> None:
    lightgbm = pytest.importorskip("lightgbm")
    X = np.load(ROWS)["X"]
    booster, forest = lightgbm.Booster(model_file=str(path)), Forest.load(path)
    # the rows were recorded in the shipped models' features (a model reads its own by name)
    assert X.shape == (640, len(forest.feature_names)) and np.isnan(X).any()
    expected = booster.predict(X)
    assert np.abs(forest.scores(X) - expected).max() <= 1e-9
    assert np.ptp(expected) > 1  # the rows spread over the model's range, not one leaf path
    # the same rows with their NaNs read as 0: a NaN is not a 0 to these splits
    zeros = np.nan_to_num(X, nan=0.0)
    expected_zeros = booster.predict(zeros)
    assert np.abs(forest.scores(zeros) - expected_zeros).max() <= 1e-9
    assert (np.abs(expected_zeros - expected) > 1e-6).sum() > 100


def test_every_missing_type_and_default_side_scores_as_lightgbm_does(tmp_path: Path) -> None:
    """The shipped mid model's trees with each split's decision type redrawn from all six
    numerical ones (missing None, Zero or NaN; default left or right), on the recorded rows
    with a fifth of their values set to 0 and some to 1e-40 (zero to LightGBM)."""
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(7)
    text = (MODELS / "ranker-mid.txt").read_text()
    text = re.sub(r"^tree_sizes=.*\n", "", text, flags=re.M)  # the sizes change below
    text = re.sub(
        r"^decision_type=.*$",
        lambda m: "decision_type=" + " ".join(str(rng.choice([0, 2, 4, 6, 8, 10])) for _ in m[0].split()),
        text,
        flags=re.M,
    )
    (tmp_path / "redrawn.txt").write_text(text)
    X = np.load(ROWS)["X"]
    X[rng.random(X.shape) < 0.2] = 0.0
    X[rng.random(X.shape) < 0.05] = 1e-40
    expected = lightgbm.Booster(model_file=str(tmp_path / "redrawn.txt")).predict(X)
    assert np.abs(Forest.parse(text).scores(X) - expected).max() <= 1e-9


def test_lightgbm_agrees_with_the_hand_worked_scores(tmp_path: Path) -> None:
    lightgbm = pytest.importorskip("lightgbm")
    (tmp_path / "tiny.txt").write_text(TINY)
    assert lightgbm.Booster(model_file=str(tmp_path / "tiny.txt")).predict(TINY_ROWS).tolist() == TINY_SCORES


PROBE = """
import sys
import numpy as np
from memlane.recall.learned import RankerModel
X = np.load(sys.argv[1])["X"][:100]
print(RankerModel.for_budget("mid").scores(X).shape[0], RankerModel.for_budget("high").scores(X).shape[0])
print(sorted(m for m in ("lightgbm", "sklearn", "scipy") if m in sys.modules))
"""


def test_the_learned_ranker_scores_without_lightgbm_sklearn_or_scipy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROWS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["100 100", "[]"]
