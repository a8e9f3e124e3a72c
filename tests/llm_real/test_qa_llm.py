"""QA with a real reader and judge: the LongMemEval harness answers each question from
Memlane's recall, from plain BM25 and from the window's worth of history, and the judge grades
each answer, all through the local model server."""

from __future__ import annotations

import pytest
from fixtures import write_longmemeval_fixture

from evals.longmemeval import run_longmemeval
from memlane.engine import Memory
from memlane.llm import build_llm
from tests.llm_real.conftest import llm_settings

pytestmark = pytest.mark.llm_real


def test_every_system_is_answered_and_graded_by_the_same_model(local_llm, tmp_path, embedder, extractor):
    # The harness consolidates each haystack's tree before asking: with the consolidator and
    # fact resolution on "auto" that is a model call per tree node (most of this test's time).
    # The model consolidates and resolves in test_tree_recall_llm.py; here it reads and judges.
    s = llm_settings(tmp_path, local_llm, tree={"consolidator": "rules"}, facts={"resolve": "rules"})
    path = write_longmemeval_fixture(tmp_path / "lme.json")
    # QA on one of the fixture's three questions: each answer takes the 135M model up to its
    # 256 tokens (~10 s on 2 cores), and what is checked (every system answered and graded,
    # through the same client, within its context budget, the limit obeyed) needs one.
    qa_llm = build_llm(s, "qa")
    with Memory(s, embedder=embedder, extractor=extractor) as m:
        report = run_longmemeval(
            m, path, progress=False, qa_llm=qa_llm, qa_tokens=300, qa_window=600, qa_limit=1
        )
    qa = report["qa_summary"]["all"]
    assert report["qa_systems"] == ["memlane", "bm25", "full-context"]
    assert report["info"]["qa questions"] == 1
    for system in report["qa_systems"]:
        assert qa[system]["n"] == 1 and qa[system]["errors"] == 0
        assert 0.0 <= qa[system]["accuracy"] <= 1.0
        assert 0 < qa[system]["context_tokens_mean"] <= (600 if system == "full-context" else 300)
    # two calls per system and question (answer, judge): every one reached the model
    assert qa_llm.usage["requests"] == 2 * 3 * 1
