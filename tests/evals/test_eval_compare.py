"""System specs, the paired bootstrap interval, the best-baseline comparison and its report
sections, and ``rank_all`` computing only the systems asked for (with a recording double)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import numpy as np
import pytest

from evals.compare import beats_best_baseline, compare_to_baselines, paired_bootstrap_ci
from evals.harness import rank_all
from evals.report import build_report, markdown
from evals.systems import channels_of, parse_systems

# --------------------------------------------------------------------------------------------
# specs


def test_parse_systems_default_and_valid_specs():
    assert parse_systems(None) == ["memlane", "flat", "bm25", "dense", "dense-minilm"]
    assert parse_systems("Dense-MiniLM, dense-bge") == ["memlane", "dense-minilm", "dense-bge"]
    assert parse_systems("memlane,bm25,lexical+semantic") == ["memlane", "bm25", "lexical+semantic"]
    # repeated option values, spaces and case; channel order does not make a new system
    assert parse_systems(["BM25", " semantic + lexical ", "dense"]) == [
        "memlane",
        "bm25",
        "lexical+semantic",
        "dense",
    ]
    assert parse_systems("graph+temporal+semantic+lexical") == ["memlane", "graph+lexical+semantic+temporal"]
    assert channels_of("lexical+semantic") == ["lexical", "semantic"]
    assert channels_of("memlane") is None and channels_of("bm25") is None


def test_parse_systems_duplicates_and_memlane_first():
    assert parse_systems("dense,bm25,dense") == ["memlane", "dense", "bm25"]
    assert parse_systems("lexical+semantic,semantic+lexical,lexical+lexical+semantic") == [
        "memlane",
        "lexical+semantic",
    ]
    # memlane is added when missing and moved first when given later
    assert parse_systems("semantic") == ["memlane", "semantic"]
    assert parse_systems("bm25,memlane") == ["memlane", "bm25"]
    assert parse_systems("bm25,") == ["memlane", "bm25"]  # an empty piece is no system


@pytest.mark.parametrize(
    "spec, bad", [("memlane,bm26", "bm26"), ("lexical+vector", "lexical+vector"), ("+", "+")]
)
def test_parse_systems_rejects_unknown_names(spec, bad):
    with pytest.raises(ValueError) as exc:
        parse_systems(spec)
    message = str(exc.value)
    assert f"'{bad}'" in message
    for allowed in ("memlane", "bm25", "dense", "semantic", "lexical", "graph", "temporal"):
        assert allowed in message


# --------------------------------------------------------------------------------------------
# the bootstrap


def test_bootstrap_identical_systems_give_zero():
    a = np.random.default_rng(3).random(50)
    assert paired_bootstrap_ci(a, a) == (0.0, 0.0)


def test_bootstrap_constant_difference_gives_that_difference():
    b = np.random.default_rng(4).random(80)
    lo, hi = paired_bootstrap_ci(b + 0.1, b)
    assert lo == pytest.approx(0.1, abs=1e-12) and hi == pytest.approx(0.1, abs=1e-12)


def test_bootstrap_noisy_positive_difference_excludes_zero_and_covers_the_mean():
    rng = np.random.default_rng(5)
    b = rng.random(300)
    a = b + 0.2 + rng.normal(0, 0.3, 300)  # mean difference 0.2, sd 0.3: se about 0.017
    lo, hi = paired_bootstrap_ci(a, b)
    d = (a - b).mean()
    assert 0 < lo < d < hi
    se = (a - b).std(ddof=1) / np.sqrt(300)
    # a percentile interval of the mean is about +-1.96 standard errors wide
    assert (hi - lo) == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_bootstrap_noise_without_difference_covers_zero():
    rng = np.random.default_rng(6)
    a, b = rng.random(200), rng.random(200)
    b = b - (b.mean() - a.mean())  # equal means
    lo, hi = paired_bootstrap_ci(a, b)
    assert lo < 0 < hi


def test_bootstrap_is_reproducible_and_seeded():
    rng = np.random.default_rng(7)
    a, b = rng.random(40), rng.random(40)
    assert paired_bootstrap_ci(a, b) == paired_bootstrap_ci(a, b)
    assert paired_bootstrap_ci(a, b, seed=1) != paired_bootstrap_ci(a, b, seed=2)
    lo, hi = paired_bootstrap_ci([], [])
    assert np.isnan(lo) and np.isnan(hi)
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_ci([1.0], [1.0, 0.0])


# --------------------------------------------------------------------------------------------
# the comparison


def _row(i, cat, memlane, bm25, dense, ablation=None):
    scores = {"memlane": memlane, "bm25": bm25, "dense": dense}
    if ablation is not None:
        scores["semantic"] = ablation
    return {"id": str(i), "category": cat, "scores": scores}


def _rows():
    """bm25 is the best baseline on r@1, dense on r@5; per category the best differs too."""
    rows = []
    # category a: memlane r@1 1.0 (bm25 .5, dense 0), r@5 1.0 (bm25 .5, dense 1.0)
    for i, (b1, b5, d5) in enumerate([(1.0, 1.0, 1.0), (0.0, 0.0, 1.0)]):
        rows.append(
            _row(
                i,
                "a",
                {"r@1": 1.0, "r@5": 1.0},
                {"r@1": b1, "r@5": b5},
                {"r@1": 0.0, "r@5": d5},
                {"r@1": 0.0, "r@5": 0.0},
            )
        )
    # category b: r@1 memlane .5 (bm25 0, dense 1.0); r@5 memlane .5 (bm25 .5, dense 0)
    for i, (m1, m5, b5) in enumerate([(0.0, 0.0, 1.0), (1.0, 1.0, 0.0)], start=2):
        rows.append(
            _row(
                i,
                "b",
                {"r@1": m1, "r@5": m5},
                {"r@1": 0.0, "r@5": b5},
                {"r@1": 1.0, "r@5": 0.0},
                {"r@1": 1.0},
            )
        )
    rows.append(
        {"id": "x", "category": "b", "scores": {"memlane": {}, "bm25": {}, "dense": {}}}
    )  # abstention
    return rows


def test_best_baseline_per_metric_and_category():
    comp = compare_to_baselines(_rows(), ["memlane", "bm25", "dense", "semantic"], resamples=500)
    assert list(comp) == ["all", "a", "b"]
    a = comp["a"]
    assert a["r@1"]["best_baseline"] == "bm25" and a["r@1"]["best_value"] == 0.5
    assert a["r@5"]["best_baseline"] == "dense" and a["r@5"]["best_value"] == 1.0
    assert a["r@1"]["diff"] == 0.5 and a["r@5"]["diff"] == 0.0 and a["r@5"]["beats"] is False
    assert a["r@5"]["ci95"] == [0.0, 0.0]
    b = comp["b"]
    assert b["r@1"]["best_baseline"] == "dense" and b["r@1"]["diff"] == -0.5
    lo, hi = b["r@1"]["ci95"]  # paired differences -1 and 0
    assert -1.0 <= lo <= -0.5 <= hi <= 0.0
    assert b["r@5"]["best_baseline"] == "bm25" and b["r@5"]["diff"] == 0.0
    assert b["r@5"]["n"] == 2  # the abstention row has no scores and is not paired
    # all: r@1 memlane 3/4 vs bm25 1/4, dense 2/4 -> dense;
    # r@5 memlane 3/4, bm25 2/4, dense 2/4 -> bm25 (the first of equals)
    al = comp["all"]
    assert al["r@1"]["baselines"] == {"bm25": 0.25, "dense": 0.5} and al["r@1"]["best_baseline"] == "dense"
    assert al["r@1"]["memlane"] == 0.75 and al["r@1"]["diff"] == 0.25
    assert al["r@5"]["baselines"] == {"bm25": 0.5, "dense": 0.5}
    assert al["r@5"]["best_baseline"] == "bm25" and al["r@5"]["diff"] == 0.25 and al["r@5"]["n"] == 4
    # ablations are not baselines
    assert "semantic" not in al["r@1"]["baselines"]
    lo, hi = al["r@1"]["ci95"]
    assert lo <= 0.25 <= hi


def test_beats_best_baseline_true_false_and_absent():
    comp = compare_to_baselines(_rows(), ["memlane", "bm25", "dense"], resamples=200)
    assert beats_best_baseline(comp, ["r@1", "r@5", "r@10"]) == {"r@1": True, "r@5": True}
    # memlane equal to the best baseline is not beating it
    rows = [_row(i, "a", {"m": v}, {"m": v}, {"m": 0.0}) for i, v in enumerate([1.0, 0.0, 1.0])]
    comp = compare_to_baselines(rows, ["memlane", "bm25", "dense"], resamples=200)
    assert beats_best_baseline(comp, ["m"]) == {"m": False}
    # below it
    rows = [_row(i, "a", {"m": 0.0}, {"m": 1.0}, {"m": 0.0}) for i in range(3)]
    assert beats_best_baseline(compare_to_baselines(rows, ["memlane", "bm25"]), ["m"]) == {"m": False}
    # a tiny positive difference is still strictly above zero
    rows = [_row(i, "a", {"m": 0.5 + (1e-6 if i == 0 else 0)}, {"m": 0.5}, {"m": 0.5}) for i in range(3)]
    assert beats_best_baseline(compare_to_baselines(rows, ["memlane", "bm25", "dense"]), ["m"]) == {"m": True}


def test_no_baseline_no_comparison():
    rows = _rows()
    assert compare_to_baselines(rows, ["memlane", "semantic"]) == {}
    report = build_report(
        benchmark="t", title="T", systems=["memlane", "semantic"], rows=rows, headline_metrics=["r@1"]
    )
    assert report["comparison"] == {} and report["beats_best_baseline"] == {}
    assert "best single-channel baseline" not in markdown(report)


def test_report_sections_and_markdown_table():
    report = build_report(
        benchmark="t",
        title="T",
        systems=["memlane", "bm25", "dense", "semantic"],
        rows=_rows(),
        headline_metrics=["r@5", "r@10"],
    )
    assert report["headline_metrics"] == ["r@5", "r@10"]
    assert report["beats_best_baseline"] == {"r@5": True}
    entry = report["comparison"]["all"]["r@5"]
    assert set(entry) == {"memlane", "baselines", "best_baseline", "best_value", "diff", "ci95", "n", "beats"}
    md = markdown(report)
    assert "## Memlane vs best single-channel baseline" in md and "### r@5" in md
    assert "### r@1" not in md  # headline metrics only
    assert "| category | n | memlane | bm25 | dense | best | diff | 95% CI | beats |" in md
    lo, hi = entry["ci95"]
    assert f"| all | 4 | 0.750 | 0.500 | 0.500 | bm25 | +0.250 | [{lo:+.3f}, {hi:+.3f}] | yes |" in md
    assert "| a | 2 | 1.000 | 0.500 | 1.000 | dense | +0.000 | [+0.000, +0.000] | no |" in md
    # the per-family tables still list every system, the ablation included
    assert "| semantic | all | 4 |" in md


# --------------------------------------------------------------------------------------------
# rank_all


class RecordingMemory:
    """A memory double: records recall options and which store searches ran."""

    def __init__(self):
        self.recalls: list[dict] = []
        self.searched: list[str] = []

        def unit(turns):
            return SimpleNamespace(unit=SimpleNamespace(source_turns=turns))

        def node(turns):
            return SimpleNamespace(node=SimpleNamespace(cited_turns=turns))

        def hit(turns):
            return SimpleNamespace(fields={"source_turns": turns})

        def recall(bank, query, **options):
            self.recalls.append(options)
            first = "s:2" if options.get("channels") else "s:1"
            memories = [unit([first]), unit(["s:3"])]
            # the tree's nodes come after the units; flat recall (planner off) has none
            ranked = memories if options.get("planner") == "off" else [*memories, node(["s:6", "s:1"])]
            return SimpleNamespace(memories=memories, ranked=lambda: ranked, tokens=10 * len(ranked))

        def lexical(bank, query, depth, fields):
            self.searched.append("lexical")
            return [hit(["s:4"])]

        def dense(bank, vector, depth, fields):
            self.searched.append("dense")
            return [[hit(["s:5"])]]

        def embed(texts):
            self.searched.append("embed")
            return [[0.0]]

        self.recall = recall
        self.store = SimpleNamespace(search_lexical=lexical, search_dense=dense)
        self.embedder = SimpleNamespace(embed=embed, embed_queries=embed)


def test_rank_all_computes_only_the_systems_asked_for():
    mem = RecordingMemory()
    when = datetime(2024, 6, 20, 9, 30, tzinfo=UTC)
    rankings, result, ms, tokens = rank_all(
        mem, "b", "q", systems=["memlane", "lexical+semantic"], reference_time=when, recall_tokens=99
    )
    assert list(rankings) == ["memlane", "lexical+semantic"]
    # a node counts the turns it cites, after the units (repeats keep their first place)
    assert rankings["memlane"] == ["s:1", "s:3", "s:6"]
    assert rankings["lexical+semantic"] == ["s:2", "s:3", "s:6", "s:1"]
    assert tokens == {"memlane": 30, "lexical+semantic": 30}
    assert mem.searched == []  # no baseline asked: no store search, no embedding
    full, ablated = mem.recalls
    # the question date is the reference time, never a validity cut-off
    assert full == {"max_tokens": 99, "as_of": None, "reference_time": when, "budget": "mid"}
    assert ablated == {**full, "channels": ["lexical", "semantic"]}
    assert ms >= 0 and [m.unit.source_turns for m in result.memories] == [["s:1"], ["s:3"]]

    mem = RecordingMemory()
    # the store-side systems (the named-embedder dense baselines are tests/evals/test_dense_baseline.py's)
    rankings, _, _, tokens = rank_all(
        mem, "b", "q", systems=["memlane", "flat", "bm25", "dense"], budget="high"
    )
    assert rankings == {
        "memlane": ["s:1", "s:3", "s:6"],
        "flat": ["s:1", "s:3"],
        "bm25": ["s:4"],
        "dense": ["s:5"],
    }
    assert tokens == {"memlane": 30, "flat": 20}
    assert [r.get("planner") for r in mem.recalls] == [None, "off"]
    assert [r["budget"] for r in mem.recalls] == ["high", "high"]  # every recall gets the run's budget
    assert sorted(mem.searched) == ["dense", "embed", "lexical"]
