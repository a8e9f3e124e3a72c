"""What a real model does on every LLM path of Memlane: per path, the share of structured
replies that validate at once, after the one repair round, or not at all (the path falls back
to its rules, or fails where it has none), the latency per HTTP call and the tokens per second,
and the retain rate with LLM extraction beside the rules' on the same turns, same run.

``python benchmarks/llm_paths.py [--input F] [--base-url URL --model M] [--threads N]
[--only cara-facts] [--out F]``

By default it starts the local model server (``memlane llm serve-local``: llama.cpp with
SmolLM2-135M-Instruct, ``make local-llm``) on a free loopback port with ``--threads`` CPU
threads and stops it after; ``--base-url``/``--model`` point it at any OpenAI-compatible
server instead. The workload is the bundled sample (``samples/conversations.jsonl``: 145 turns
of two banks): retain the first two thirds of each bank with the rules and then with the LLM
extractor; reflect on the questions below (opinions form); retain the last third with CARA's
jobs inline (opinion assessments, observations); consolidate the tree with the LLM and the
adjudicator; recall each question with the LLM planner, the LLM abstention gate and LLM
decomposition; answer and judge each question (QA). Calls go one at a time
(``llm.concurrency`` 1), so each call's tokens are its own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The reply model's name -> the path it belongs to (QA's answer and judge are plain text).
PATHS = {
    "ExtractionReply": "retain: fact extraction",
    "ReflectReply": "reflect: answer + opinions",
    "Assessment": "CARA: opinion assessment",
    "ObservationReply": "CARA: observations",
    "Summary": "tree: consolidation",
    "AdjudicatorReply": "facts: adjudicator",
    "PlanReply": "recall: planner",
    "GateReply": "recall: abstention gate",
    "DecomposeReply": "recall: decomposition",
    "text": "QA: answer + judge",
}
# What "completion_tok_per_s" means: completion tokens over the calls' whole time (prompt
# evaluation included), i.e. what a caller gets, not the decoder's peak.
# Questions about the sample, written for this benchmark (the last has no answer in it).
QUESTIONS = {
    "priya": [
        "Where does Priya work?",
        "What is the name of Priya's dog?",
        "How did Priya's coffee habit change?",
        "When is Priya's presentation to the council?",
        "Who owns the greyhound that kept Biscuit company during the wedding?",
        "What is the name of Priya's brother?",
    ],
    "tomas": [
        "Where does Tomás work now?",
        "What happened to Miso in March?",
        "Where did Tomás move to?",
        "When is the Oban triathlon?",
    ],
}
GOLD = {  # for the QA judge only
    "Where does Priya work?": "Rivermark, a flood-modelling consultancy in Leeds",
    "What is the name of Priya's dog?": "Biscuit",
    "How did Priya's coffee habit change?": "from black coffee to oat-milk flat whites",
    "When is Priya's presentation to the council?": "26 June",
    "Who owns the greyhound that kept Biscuit company during the wedding?": "Gwen, her neighbour",
    "What is the name of Priya's brother?": "not mentioned",
    "Where does Tomás work now?": "Salt & Ember in Finnieston",
    "What happened to Miso in March?": "she needed two teeth out",
    "Where did Tomás move to?": "Partick",
    "When is the Oban triathlon?": "14 June",
}


SEEDED_OPINIONS = [
    ("priya", "I think Biscuit is a calm, easy dog.", "Biscuit"),
    ("tomas", "I believe Miso is a perfectly healthy cat.", "Miso"),
]
# Pairs said at the same instant about one slot: only the adjudicator can order them.
PAIRS = [
    ("I live in Bristol.", "I live in Leeds."),
    ("I work at Rivermark.", "I work at Salt & Ember."),
    ("My favourite drink is black coffee.", "My favourite drink is oat-milk flat white."),
    ("My dog is called Biscuit.", "My dog is called Pepper."),
    ("I drive a blue car.", "I drive a red car."),
]


def _ambiguous_pairs():
    from datetime import UTC, datetime

    from memlane.records import Turn

    at = datetime(2025, 6, 1, 9, tzinfo=UTC)
    docs = []
    for i, pair in enumerate(PAIRS):
        for j, text in enumerate(pair):
            doc = f"pair{i}-{j}"
            turn = Turn(
                document_id=doc,
                session_id=doc,
                turn_id=f"{doc}:0",
                index=0,
                speaker="Ana",
                text=text,
                timestamp=at,
            )
            docs.append((doc, [turn]))
    return docs


class Recorder:
    """Every HTTP call (path, seconds, prompt and completion tokens) and every structured
    reply's outcome, recorded by wrapping the client class for the run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int, int]] = []
        self.outcomes: dict[str, Counter] = defaultdict(Counter)

    def install(self) -> None:
        from memlane.llm.openai_compat import OpenAICompatLLM

        complete, record, rec = OpenAICompatLLM.complete, OpenAICompatLLM.record, self

        def timed(client, messages, *, json_schema=None, **kw):
            kind = str((json_schema or {}).get("title") or "text")
            before = dict(client.usage)
            t0 = time.perf_counter()
            try:
                return complete(client, messages, json_schema=json_schema, **kw)
            finally:
                rec.calls.append(
                    (
                        kind,
                        time.perf_counter() - t0,
                        client.usage["prompt_tokens"] - before["prompt_tokens"],
                        client.usage["completion_tokens"] - before["completion_tokens"],
                    )
                )

        def counted(client, kind, outcome):
            rec.outcomes[kind][outcome] += 1
            record(client, kind, outcome)

        OpenAICompatLLM.complete = timed  # type: ignore[method-assign]
        OpenAICompatLLM.record = counted  # type: ignore[method-assign]

    def table(self) -> list[dict]:
        rows = []
        for kind, path in PATHS.items():
            calls = [c for c in self.calls if c[0] == kind]
            if not calls:
                continue
            seconds = [c[1] for c in calls]
            out = self.outcomes.get(kind, Counter())
            replies = sum(out.values())
            gen = sum(c[3] for c in calls)
            rows.append(
                {
                    "path": path,
                    "replies": replies if kind != "text" else len(calls),
                    "valid": _share(out["valid"], replies),
                    "repaired": _share(out["repaired"], replies),
                    "fallback": _share(out["invalid"] + out["error"], replies),
                    "calls": len(calls),
                    "p50_s": round(statistics.median(seconds), 2),
                    "p95_s": round(_p95(seconds), 2),
                    "prompt_tokens_per_call": round(sum(c[2] for c in calls) / len(calls)),
                    "completion_tokens_per_call": round(gen / len(calls)),
                    "completion_tok_per_s": round(gen / sum(seconds), 1) if sum(seconds) else None,
                }
            )
        return rows


def _share(n: int, total: int) -> float | None:
    return round(n / total, 3) if total else None


def _p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def _stage(text: str) -> None:
    print(f"[llm_paths {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _split(conversations, share: float = 2 / 3):
    """Each bank's first ``share`` of turns and the rest (a document of its own, as a later
    conversation arrives), as (bank, document, turns) lists."""
    first, rest = [], []
    for c in conversations:
        cut = int(len(c.turns) * share)
        first.append((c.bank_id, c.document_id, c.turns[:cut]))
        later = [t.model_copy(update={"document_id": f"{c.document_id}-later"}) for t in c.turns[cut:]]
        rest.append((c.bank_id, f"{c.document_id}-later", later))
    return first, rest


def run(input_path: Path, base_url: str, model: str, work: Path, extract_tokens: int) -> dict:
    from evals.qa import answer_and_grade, lme_grader, lme_verdict, memory_context, pack
    from memlane.engine import Memory
    from memlane.ingest import load_conversations
    from memlane.reflect.opinions import OpinionDraft
    from memlane.settings import Settings

    rec = Recorder()
    rec.install()
    conversations = load_conversations(input_path, format="jsonl")
    first, rest = _split(conversations)
    turns_first = sum(len(t) for _, _, t in first)
    llm = {
        "base_url": base_url,
        "model": model,
        "concurrency": 1,
        "max_retries": 1,
        "timeout_s": 120,
        "extract_max_tokens": extract_tokens,
    }
    report: dict = {
        "input": str(input_path),
        "turns_retained": turns_first,
        "model": model,
        "extract_max_tokens": extract_tokens,
    }

    # 1. the retain rate: rules, then the LLM extractor (inline), on the same turns
    rates = {}
    for name, extractor in (("rules", "rules"), ("llm", "llm")):
        _stage(f"retain {turns_first} turns with the {name} extractor")
        s = Settings(
            data_dir=work / name,
            llm=llm,
            retain={"extractor": extractor, "defer_llm": False},
            background={"mode": "off"},
        )
        with Memory(s) as m:
            m.embedder.embed(["warm up"])  # models load outside the timing
            _ = m.extractor
            t0 = time.perf_counter()
            for bank, doc, turns in first:
                m.retain(bank, [(doc, turns)])
            rates[name] = turns_first / (time.perf_counter() - t0)
            if name == "llm":
                report["extractor_chunks"] = dict(m.extractor.stats)
    report["retain_turns_per_s"] = {k: round(v, 2) for k, v in rates.items()}

    # 2. CARA, the tree, the adjudicator and recall's paths on the LLM-extracted banks
    s = Settings(
        data_dir=work / "llm",
        llm=llm,
        retain={"extractor": "llm", "defer_llm": False},
        background={"mode": "sync", "reflect": True, "tree": False, "models": False},
        tree={"consolidator": "llm"},
        facts={"resolve": "llm", "abstain": "llm"},
    )
    failures: Counter = Counter()
    with Memory(s) as m:
        _stage("reflect on the questions")
        for bank, questions in QUESTIONS.items():
            for q in questions:
                try:
                    m.reflect(bank, q, budget="low", max_tokens=1000)
                except Exception as exc:  # noqa: BLE001 - counted: reflect has no fallback
                    failures[f"reflect: {type(exc).__name__}"] += 1
        # Opinions to reassess (the reflect replies above may have formed none)
        for bank, statement, entity in SEEDED_OPINIONS:
            m.reflection.form_opinions(
                m.banks.get(bank),
                [OpinionDraft(statement=statement, confidence=0.6, entities=[entity])],
                [],
                "seed",
            )
        _stage("retain the rest with CARA's jobs inline")
        for bank, doc, turns in rest:  # the rest of each history: assessments, observations
            m.retain(bank, [(doc, turns)])
        _stage("consolidate the trees; adjudicate ambiguous pairs")
        for bank in QUESTIONS:
            m.consolidate(bank)
        m.retain("pairs", _ambiguous_pairs())
        m.consolidate("pairs")
        _stage("recall with the planner, the gate and decomposition; QA")
        for bank, questions in QUESTIONS.items():
            for q in questions:
                m.recall(bank, q, planner="llm", decompose="llm")
                result = m.recall(bank, q, max_tokens=1000)
                ctx = pack(result.ranked(), 1000)
                entry = answer_and_grade(
                    m.reflection.llm("reflect"),
                    question=q,
                    context=memory_context(ctx),
                    context_tokens=sum(x.tokens for x in ctx),
                    grade=lme_grader("single-session-user", q, GOLD[q], False),
                    verdict=lme_verdict,
                )
                if "error" in entry:
                    failures[f"qa: {entry['error'].split(':', 1)[0]}"] += 1
        report["doctor_errors"] = {b: len(m.banks.doctor(b).errors) for b in [*QUESTIONS, "pairs"]}
    report["failures"] = dict(failures)
    report["paths"] = rec.table()
    return report


def run_cara_facts(input_path: Path, base_url: str, model: str, work: Path) -> dict:
    """Only the paths that need rules-extracted facts to start from: CARA's opinion
    assessments and observations after a retain, and the adjudicator of ambiguous pairs (the
    full run's LLM-extracted facts carry few slots and entities, so it seldom reaches them)."""
    from memlane.engine import Memory
    from memlane.ingest import load_conversations
    from memlane.reflect.opinions import OpinionDraft
    from memlane.settings import Settings

    rec = Recorder()
    rec.install()
    first, rest = _split(load_conversations(input_path, format="jsonl"))
    s = Settings(
        data_dir=work / "cara-facts",
        llm={"base_url": base_url, "model": model, "concurrency": 1, "max_retries": 1, "timeout_s": 120},
        background={"mode": "sync", "reflect": True, "tree": False, "models": False},
        facts={"resolve": "llm"},
    )
    with Memory(s) as m:
        _stage("retain two thirds with the rules; seed opinions")
        for bank, doc, turns in first:
            m.retain(bank, [(doc, turns)])
        for bank, statement, entity in SEEDED_OPINIONS:
            draft = OpinionDraft(statement=statement, confidence=0.6, entities=[entity])
            m.reflection.form_opinions(m.banks.get(bank), [draft], [], "seed")
        _stage("retain the rest with CARA's jobs inline")
        for bank, doc, turns in rest:
            m.retain(bank, [(doc, turns)])
        _stage("adjudicate ambiguous pairs")
        m.retain("pairs", _ambiguous_pairs())
        report = {"resolve": m.consolidate("pairs").facts}
        report["doctor_errors"] = {b: len(m.banks.doctor(b).errors) for b in [*QUESTIONS, "pairs"]}
    report["paths"] = rec.table()
    return report


def _print(report: dict) -> None:
    cols = ["path", "replies", "valid", "repaired", "fallback", "calls", "p50_s", "p95_s"]
    cols += ["prompt_tokens_per_call", "completion_tokens_per_call", "completion_tok_per_s"]
    print(" | ".join(cols))
    for row in report["paths"]:
        print(" | ".join(str(row[c]) for c in cols))
    if "retain_turns_per_s" in report:
        chunks = report.get("extractor_chunks")
        print(f"retain turns/s: {report['retain_turns_per_s']} (extractor chunks: {chunks})")
        print(f"failures: {report['failures']}")
    if "resolve" in report:
        print(f"pairs resolved: {report['resolve']}")
    print(f"doctor errors: {report['doctor_errors']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=ROOT / "samples" / "conversations.jsonl")
    parser.add_argument(
        "--base-url", default=None, help="an OpenAI-compatible server (default: start the local one)"
    )
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=None, help="the local server's CPU threads")
    parser.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    # SmolLM2-135M's extraction replies that validate are 60-200 tokens; the others run on to
    # the limit (tests/llm_real/conftest.py): the setting's 1,500 would only time them longer.
    parser.add_argument("--extract-tokens", type=int, default=400, help="llm.extract_max_tokens")
    parser.add_argument(
        "--only",
        choices=["cara-facts"],
        default=None,
        help="cara-facts: only opinion assessments, observations and the adjudicator, on rules facts",
    )
    args = parser.parse_args(argv)
    from cluster.processes import exit_on_sigterm

    exit_on_sigterm()  # a `kill` still stops the model server it starts
    with tempfile.TemporaryDirectory(prefix="memlane-llm-paths-") as tmp:
        work = Path(tmp)
        server = None
        if args.base_url is None:
            from cluster import llm_local
            from cluster.local import free_port

            server = llm_local.start(work / "server", port=free_port(), threads=args.threads)
            base_url, model = server.base_url, server.alias
        else:
            base_url, model = args.base_url, args.model or "default"
        try:
            t0 = time.perf_counter()
            if args.only == "cara-facts":
                report = run_cara_facts(args.input, base_url, model, work)
            else:
                report = run(args.input, base_url, model, work, args.extract_tokens)
            report["wall_s"] = round(time.perf_counter() - t0, 1)
        finally:
            if server is not None:
                llm_local.stop(work / "server")
    _print(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
