"""Tests of the scipy.sparse memory graph (memlane.stores.sparse_graph.SparseGraphStore).

Expected values are derived in the tests from the inputs (hand arithmetic or the small dense
reference below), never from the store under test.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import defaultdict

import pytest

from memlane.interfaces import GraphNode, GraphStore
from memlane.records import Link, LinkType
from memlane.stores.sparse_graph import SparseGraphStore
from memlane.stores.sparse_graph import spread as spread_module

BASE = 1_700_000_000.0
HOUR = 3600.0


def node(uid: str, ts: float = BASE, ents=(), links=()) -> GraphNode:
    return GraphNode(id=uid, entity_ids=list(ents), timestamp=ts, links=list(links))


def link(target: str, kind: LinkType = LinkType.semantic, weight: float = 1.0) -> Link:
    return Link(target_id=target, type=kind, weight=weight)


def edge_map(store: SparseGraphStore, bank: str, edge_type: str | None = None) -> dict:
    """{(frozenset(endpoints), type): weight} from the store's edge listing."""
    out = {}
    for a, b, t, w in store.edges(bank, edge_type):
        key = (frozenset((a, b)), t)
        assert key not in out, f"duplicate edge {key}"
        out[key] = w
    return out


def random_nodes(n: int, seed: int, n_entities: int = 12, pending: bool = True) -> list[GraphNode]:
    """A random bank: shared hub entity, rare entities, tied timestamps, semantic and causal links
    in both directions, some to ids that are not in the bank."""
    rng = random.Random(seed)
    ids = [f"u{i:03d}" for i in range(n)]
    out = []
    for uid in ids:
        ents = {"hub"} if rng.random() < 0.7 else set()
        ents |= {f"e{rng.randrange(n_entities)}" for _ in range(rng.randrange(3))}
        links = []
        for _ in range(rng.randrange(4)):
            if not pending or rng.random() < 0.8:
                target = rng.choice(ids)
            else:
                target = f"missing{rng.randrange(5)}"
            kind = rng.choice(
                [
                    LinkType.semantic,
                    LinkType.semantic,
                    LinkType.causes,
                    LinkType.caused_by,
                    LinkType.enables,
                    LinkType.prevents,
                ]
            )
            links.append(link(target, kind, round(rng.uniform(0.1, 1.0), 3)))
        ts = BASE + rng.randrange(40) * 1800.0  # many ties: the id must break them
        out.append(node(uid, ts, sorted(ents), links))
    return out


def reference_spread(nodes, seeds, hops, decay, k, sigma_hours) -> dict[str, float]:
    """Spreading activation on a dict-of-dicts graph built straight from the design rules."""
    units = {x.id: x for x in nodes}
    order = sorted(units, key=lambda u: (units[u].timestamp, u))
    adj: dict = defaultdict(lambda: defaultdict(float))

    def add(x, y, w):
        adj[x][y] += w
        adj[y][x] += w

    for uid in order:
        for e in set(units[uid].entity_ids):
            add(("u", uid), ("e", e), 1.0)
    sigma = sigma_hours * HOUR
    for i, a in enumerate(order):
        for j in range(i + 1, min(i + k, len(order) - 1) + 1):
            b = order[j]
            add(("u", a), ("u", b), math.exp(-abs(units[b].timestamp - units[a].timestamp) / sigma))
    best: dict = {}
    for x in units.values():
        for ln in x.links:
            if ln.target_id not in units or ln.target_id == x.id:
                continue
            if ln.type is LinkType.semantic:
                fam = "semantic"
            elif ln.type in {LinkType.causes, LinkType.caused_by, LinkType.enables, LinkType.prevents}:
                fam = "causal"
            else:
                continue
            key = (frozenset((x.id, ln.target_id)), fam)
            best[key] = max(best.get(key, 0.0), ln.weight)
    for (pair, _fam), w in best.items():
        a, b = sorted(pair)
        add(("u", a), ("u", b), w)

    act = {("u", s): v for s, v in seeds.items() if s in units}
    total: dict = defaultdict(float)
    for _ in range(hops):
        nxt: dict = defaultdict(float)
        for x, ax in act.items():
            deg = sum(adj[x].values())
            if deg > 0:
                for y, w in adj[x].items():
                    nxt[y] += decay * ax * w / deg
        for y, v in nxt.items():
            total[y] += v
        act = nxt
    return {u: v for (kind, u), v in total.items() if kind == "u" and u not in seeds and v > 0}


# ----------------------------------------------------------------------------- structure


def test_implements_protocol():
    assert isinstance(SparseGraphStore(), GraphStore)


def test_add_is_idempotent_and_replaces_edges():
    g = SparseGraphStore(temporal_neighbors=1)
    nodes = [
        node("a", BASE, ["x", "y"], [link("b")]),
        node("b", BASE + HOUR, ["x"]),
        node("c", BASE + 2 * HOUR, ["z", "z", ""], [link("a", LinkType.causes, 0.5)]),
    ]
    g.add_nodes("bank", nodes)
    first = (g.stats("bank"), edge_map(g, "bank"))
    assert first[0] == {
        "units": 3,
        "entities": 3,
        "edges": 4 + 2 + 1 + 1,
        "entity": 4,
        "temporal": 2,
        "semantic": 1,
        "causal": 1,
    }
    g.add_nodes("bank", nodes)
    g.add_nodes("bank", list(reversed(nodes)))
    assert (g.stats("bank"), edge_map(g, "bank")) == first

    # Re-adding "a" with other entities and no links replaces its edges.
    g.add_nodes("bank", [node("a", BASE, ["z"])])
    em = edge_map(g, "bank")
    assert (frozenset(("a", "x")), "entity") not in em
    assert (frozenset(("a", "z")), "entity") in em
    assert (frozenset(("a", "b")), "semantic") not in em
    assert g.stats("bank")["entities"] == 2  # "y" lost its only unit


def test_entity_links_are_bipartite_not_cliques():
    g = SparseGraphStore(temporal_neighbors=0)
    n = 300
    g.add_nodes("bank", [node(f"u{i}", BASE + i, ["speaker"]) for i in range(n)])
    st = g.stats("bank")
    # A clique would be n*(n-1)/2 = 44850 edges; the bipartite layout is one edge per mention.
    assert st["entity"] == n and st["edges"] == n and st["entities"] == 1
    assert {b for _, b, _, _ in g.edges("bank", "entity")} == {"speaker"}
    g.add_nodes("bank", [node(f"v{i}", BASE + i, ["speaker"]) for i in range(n)])
    assert g.stats("bank")["edges"] == 2 * n  # linear in units


def expected_temporal(nodes, k, sigma_hours):
    units = {x.id: x for x in nodes}
    order = sorted(units, key=lambda u: (units[u].timestamp, u))
    out = {}
    for i, a in enumerate(order):
        for b in order[i + 1 : i + 1 + k]:
            dt = abs(units[b].timestamp - units[a].timestamp)
            out[(frozenset((a, b)), "temporal")] = math.exp(-dt / (sigma_hours * HOUR))
    return out


def test_temporal_neighbours_and_weights_incremental_and_exact():
    sigma_h, k = 5.0, 2
    g = SparseGraphStore(temporal_sigma_hours=sigma_h, temporal_neighbors=k)
    rng = random.Random(7)
    nodes = [node(f"t{i:02d}", BASE + rng.randrange(12) * HOUR) for i in range(25)]  # with ties
    g.add_nodes("bank", nodes)
    got = edge_map(g, "bank", "temporal")
    want = expected_temporal(nodes, k, sigma_h)
    assert got.keys() == want.keys()
    for key, w in want.items():
        assert got[key] == pytest.approx(w, rel=1e-12)

    # Spot check by hand: ids at the same time are neighbours in id order with weight 1.
    g2 = SparseGraphStore(temporal_sigma_hours=sigma_h, temporal_neighbors=1)
    g2.add_nodes("b", [node("b", BASE), node("a", BASE), node("c", BASE + 2 * HOUR)])
    assert edge_map(g2, "b", "temporal") == {
        (frozenset(("a", "b")), "temporal"): 1.0,
        (frozenset(("b", "c")), "temporal"): pytest.approx(math.exp(-2 / sigma_h)),
    }
    # Inserting a node between b and c links it to both; the b-c link (now two places apart)
    # goes, exactly as a rebuild would have it.
    g2.add_nodes("b", [node("m", BASE + HOUR)])
    assert edge_map(g2, "b", "temporal") == {
        (frozenset(("a", "b")), "temporal"): 1.0,
        (frozenset(("b", "m")), "temporal"): pytest.approx(math.exp(-1 / sigma_h)),
        (frozenset(("m", "c")), "temporal"): pytest.approx(math.exp(-1 / sigma_h)),
    }
    # Removing it re-links across the gap.
    g2.remove_nodes("b", ["m"])
    assert set(edge_map(g2, "b", "temporal")) == {
        (frozenset(("a", "b")), "temporal"),
        (frozenset(("b", "c")), "temporal"),
    }

    # Incremental inserts in random order and removals match the expectation for the final set.
    more = [node(f"s{i:02d}", BASE + rng.randrange(24) * HOUR) for i in range(20)]
    rng.shuffle(more)
    for i in range(0, len(more), 3):
        g.add_nodes("bank", more[i : i + 3])
    g.remove_nodes("bank", ["t03", "s05", "nope"])
    final = [x for x in nodes + more if x.id not in {"t03", "s05"}]
    got = edge_map(g, "bank", "temporal")
    want = expected_temporal(final, k, sigma_h)
    assert got.keys() == want.keys()
    assert all(got[key] == pytest.approx(w, rel=1e-12) for key, w in want.items())


def test_semantic_and_causal_links_pending_and_merged():
    g = SparseGraphStore(temporal_neighbors=0)
    g.add_nodes(
        "bank",
        [
            node(
                "a",
                links=[
                    link("b", LinkType.semantic, 0.8),
                    link("c", LinkType.causes, 0.6),
                    link("a", LinkType.semantic, 1.0),  # self link: ignored
                    link("b", LinkType.temporal, 1.0),  # derived family: ignored
                    link("z", LinkType.semantic, 0.9),
                ],
            ),  # pending
            node("b", links=[link("a", LinkType.semantic, 0.9)]),  # same pair: max weight wins
        ],
    )
    assert edge_map(g, "bank") == {(frozenset(("a", "b")), "semantic"): 0.9}
    # The causal target arrives, declaring the reverse relation: one causal edge, max weight.
    g.add_nodes("bank", [node("c", links=[link("a", LinkType.caused_by, 0.4)])])
    assert edge_map(g, "bank") == {
        (frozenset(("a", "b")), "semantic"): 0.9,
        (frozenset(("a", "c")), "causal"): 0.6,
    }
    g.add_nodes("bank", [node("z")])  # the pending semantic link attaches
    assert edge_map(g, "bank", "semantic")[(frozenset(("a", "z")), "semantic")] == 0.9
    st = g.stats("bank")
    assert (st["semantic"], st["causal"], st["edges"]) == (2, 1, 3)
    # Removing the target detaches the edge; the link stays declared and comes back with it.
    g.remove_nodes("bank", ["z"])
    assert g.stats("bank")["semantic"] == 1
    g.add_nodes("bank", [node("z")])
    assert g.stats("bank")["semantic"] == 2


# ----------------------------------------------------------------------------- spreading


def hub_bank(g: SparseGraphStore) -> None:
    # S and R share a rare entity; everyone shares the hub. No temporal links.
    nodes = [
        node("S", BASE, ["hub", "rare"]),
        node("R", BASE + 5, ["hub", "rare"]),
        node("H", BASE + 1, ["hub"]),
    ]
    nodes += [node(f"F{i}", BASE + 10 + i, ["hub"]) for i in range(7)]
    g.add_nodes("bank", nodes)


def test_spread_prefers_rare_entity_over_hub_with_exact_values():
    g = SparseGraphStore(temporal_neighbors=0)
    hub_bank(g)
    got = g.spread("bank", {"S": 1.0}, hops=2, decay=0.5, limit=3)
    # By hand: S (degree 2) passes 0.5*1/2 = 0.25 to "rare" and to "hub". Hop 2: rare (degree 2)
    # gives R 0.5*0.25/2 = 0.0625; hub (degree 10) gives every unit 0.5*0.25/10 = 0.0125.
    assert [u for u, _ in got] == ["R", "H", "F0"]  # ties among hub-only units in time order
    assert got[0][1] == pytest.approx(0.0625 + 0.0125)
    assert got[1][1] == pytest.approx(0.0125) and got[2][1] == pytest.approx(0.0125)
    everyone = g.spread("bank", {"S": 1.0}, hops=2, decay=0.5, limit=100)
    names = {u for u, _ in everyone}
    assert names == {"R", "H"} | {f"F{i}" for i in range(7)}  # no seed, no entity vertex
    assert "hub" not in names and "rare" not in names and "S" not in names


def test_spread_one_hop_reaches_only_entities_so_returns_nothing():
    g = SparseGraphStore(temporal_neighbors=0)
    hub_bank(g)
    assert g.spread("bank", {"S": 1.0}, hops=1, decay=0.5, limit=10) == []


def test_spread_limit_order_seeds_and_unknowns():
    nodes = random_nodes(60, seed=3)
    g = SparseGraphStore(temporal_sigma_hours=6.0, temporal_neighbors=2)
    g.add_nodes("bank", nodes)
    seeds = {"u001": 1.0, "u010": 0.5, "nope": 3.0}
    full = g.spread("bank", seeds, hops=3, decay=0.6, limit=1000)
    assert len(full) > 10
    scores = [s for _, s in full]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert not {"u001", "u010", "nope"} & {u for u, _ in full}
    assert g.spread("bank", seeds, hops=3, decay=0.6, limit=5) == full[:5]
    assert g.spread("bank", {"nope": 1.0}, hops=2, decay=0.5, limit=5) == []
    assert g.spread("other", {"u001": 1.0}, hops=2, decay=0.5, limit=5) == []
    assert g.spread("bank", {"u001": 1.0}, hops=2, decay=0.5, limit=0) == []


# Each way a hop is computed, forced: sparse gathers (every gathered hop sparse), dense
# gathers (none sparse) and full mat-vecs (no hop gathered).
HOP_PATHS = {"sparse": (1.0, 0), "gather": (1.0, 1 << 40), "matvec": (-1.0, 0)}


@pytest.mark.parametrize("path", sorted(HOP_PATHS))
@pytest.mark.parametrize(
    "seed,hops,decay,k", [(1, 1, 0.5, 2), (2, 2, 0.5, 2), (3, 3, 0.8, 1), (4, 2, 1.0, 3)]
)
def test_spread_matches_dense_reference(seed, hops, decay, k, path, monkeypatch):
    gather_fraction, sparse_factor = HOP_PATHS[path]
    monkeypatch.setattr(spread_module, "GATHER_MAX_FRACTION", gather_fraction)
    monkeypatch.setattr(spread_module, "SPARSE_HOP_FACTOR", sparse_factor)
    nodes = random_nodes(80, seed=seed)
    # Duplicate ids: the last one wins in both implementations.
    nodes.append(node("u005", BASE + 3 * HOUR, ["e1"], [link("u006", LinkType.enables, 0.7)]))
    sigma_h = 3.0
    g = SparseGraphStore(temporal_sigma_hours=sigma_h, temporal_neighbors=k)
    g.add_nodes("bank", nodes)
    seeds = {"u000": 1.0, "u017": 0.7, "u042": 0.2, "missing0": 1.0}
    got = dict(g.spread("bank", seeds, hops=hops, decay=decay, limit=10_000))
    want = reference_spread(nodes, seeds, hops, decay, k, sigma_h)
    assert got.keys() == want.keys()
    for u, v in want.items():
        assert got[u] == pytest.approx(v, rel=1e-9, abs=1e-15)


def test_spread_on_10k_units_with_a_hub_returns_full_limit():
    rng = random.Random(0)
    n = 10_000
    nodes = [
        GraphNode(
            id=f"u{i}",
            entity_ids=["speaker", f"e{rng.randrange(2000)}"],
            timestamp=BASE + i * 60.0,
            links=[link(f"u{rng.randrange(n)}", LinkType.semantic, 0.8)],
        )
        for i in range(n)
    ]
    g = SparseGraphStore()
    g.add_nodes("bank", nodes)
    assert g.stats("bank")["entity"] == 2 * n
    g.spread("bank", {"u0": 1.0}, hops=2, decay=0.5, limit=10)  # builds the matrix
    # Speed is measured by the benchmark (about 0.2 ms here), not asserted in a test.
    for _ in range(20):
        seeds = {f"u{rng.randrange(n)}": 1.0 for _ in range(10)}
        res = g.spread("bank", seeds, hops=2, decay=0.5, limit=50)
        assert len(res) == 50
        assert not set(seeds) & {u for u, _ in res}
        assert [a for _, a in res] == sorted((a for _, a in res), reverse=True)


@pytest.mark.parametrize("limit", [1, 10, 40])
def test_the_sampled_cut_keeps_the_lists(limit, monkeypatch):
    """The best-``limit`` cut over a dense hop first looks at a sample of the scores (its
    limit-th best is a floor under the cut): the same lists, scores to the bit, as selecting
    among every positive score. A hub of every unit, a few middling entities and ties."""
    rng = random.Random(5)
    n = 30_000
    nodes = [
        GraphNode(
            id=f"u{i}",
            entity_ids=["speaker", f"e{rng.randrange(40)}", f"r{rng.randrange(3000)}"],
            timestamp=BASE + i * 60.0,
        )
        for i in range(n)
    ]
    g = SparseGraphStore()
    g.add_nodes("bank", nodes)
    seed_sets = [{f"u{rng.randrange(n)}": rng.random() + 0.1 for _ in range(10)} for _ in range(8)]
    sampled = [g.spread("bank", s, hops=2, decay=0.5, limit=limit) for s in seed_sets]
    monkeypatch.setattr(spread_module, "CUT_SAMPLE", 1 << 40)  # no sample: every score
    full = [g.spread("bank", s, hops=2, decay=0.5, limit=limit) for s in seed_sets]
    assert sampled == full and all(len(x) == limit for x in full)


# ----------------------------------------------------------------------------- lifecycle


def test_remove_nodes_and_drop_bank():
    g = SparseGraphStore(temporal_neighbors=1)
    g.add_nodes(
        "bank",
        [
            node("a", BASE, ["x", "only-a"]),
            node("b", BASE + 1, ["x"]),
            node("c", BASE + 2, ["y"], [link("a")]),
        ],
    )
    assert g.stats("bank")["entities"] == 3
    g.remove_nodes("bank", ["a", "ghost"])
    st = g.stats("bank")
    assert st == {
        "units": 2,
        "entities": 2,
        "edges": 3,
        "entity": 2,
        "temporal": 1,
        "semantic": 0,
        "causal": 0,
    }
    assert {u for u, _ in g.spread("bank", {"b": 1.0}, hops=3, decay=0.5, limit=10)} == {"c"}
    g.remove_nodes("unknown-bank", ["a"])  # no error
    with pytest.raises(TypeError):
        g.remove_nodes("bank", "b")

    assert g.has_bank("bank")
    g.drop_bank("bank")
    assert not g.has_bank("bank")
    assert g.stats("bank")["units"] == 0
    assert g.spread("bank", {"b": 1.0}, hops=2, decay=0.5, limit=10) == []


def test_many_removals_compact_and_stay_correct():
    g = SparseGraphStore(temporal_neighbors=1)
    nodes = random_nodes(120, seed=9)
    for round_ in range(30):  # churn: far more dead slots than live units, forcing compaction
        g.add_nodes("bank", [node(f"tmp{round_}_{i}", BASE + i, [f"gone{round_}"]) for i in range(100)])
        g.remove_nodes("bank", [f"tmp{round_}_{i}" for i in range(100)])
    g.add_nodes("bank", nodes)
    fresh = SparseGraphStore(temporal_neighbors=1)
    fresh.add_nodes("bank", nodes)
    assert g.stats("bank") == fresh.stats("bank")
    assert edge_map(g, "bank") == edge_map(fresh, "bank")
    seeds = {"u000": 1.0, "u050": 1.0}
    assert g.spread("bank", seeds, hops=2, decay=0.5, limit=50) == fresh.spread(
        "bank", seeds, hops=2, decay=0.5, limit=50
    )


def test_rebuild_is_order_independent_and_matches_incremental():
    nodes = random_nodes(100, seed=11)
    a = SparseGraphStore()
    a.rebuild("bank", nodes)
    shuffled = nodes[:]
    random.Random(1).shuffle(shuffled)
    b = SparseGraphStore()
    b.rebuild("bank", iter(shuffled))  # any iterable
    c = SparseGraphStore()  # incremental, in batches, with a removal and re-add on the way
    for i in range(0, len(shuffled), 7):
        c.add_nodes("bank", shuffled[i : i + 7])
    c.remove_nodes("bank", ["u010", "u020"])
    c.add_nodes("bank", [x for x in nodes if x.id in {"u010", "u020"}])
    assert a.stats("bank") == b.stats("bank") == c.stats("bank")
    assert edge_map(a, "bank") == edge_map(b, "bank") == edge_map(c, "bank")
    for seeds in ({"u000": 1.0}, {"u012": 0.3, "u099": 1.0}):
        ra = a.spread("bank", seeds, hops=3, decay=0.5, limit=60)
        assert ra == b.spread("bank", seeds, hops=3, decay=0.5, limit=60)
        assert ra == c.spread("bank", seeds, hops=3, decay=0.5, limit=60)
    # rebuild replaces: what was there before is gone.
    a.rebuild("bank", nodes[:10])
    assert a.stats("bank")["units"] == 10


def test_invalid_batch_changes_nothing():
    g = SparseGraphStore()
    g.add_nodes("bank", [node("a")])
    with pytest.raises(ValueError):
        g.add_nodes("bank", [node("b"), node("c", float("nan"))])
    assert g.stats("bank")["units"] == 1
    with pytest.raises(ValueError):
        SparseGraphStore(temporal_sigma_hours=0)


def test_to_igraph_export():
    nodes = random_nodes(40, seed=2)
    g = SparseGraphStore()
    g.add_nodes("bank", nodes)
    ig_graph = g.to_igraph("bank")
    st = g.stats("bank")
    assert ig_graph.vcount() == st["units"] + st["entities"] and ig_graph.ecount() == st["edges"]
    hub = ig_graph.vs.find(name="hub")
    assert hub["kind"] == "entity"
    assert hub.degree() == sum("hub" in x.entity_ids for x in nodes)
    with pytest.raises(KeyError):
        g.to_igraph("nope")


def test_concurrent_spread_while_adding():
    nodes = random_nodes(1500, seed=4, n_entities=200)
    universe = {x.id for x in nodes}
    g = SparseGraphStore()
    g.add_nodes("bank", nodes[:100])
    seeds = {"u000": 1.0, "u001": 0.5, "u050": 0.8}
    errors: list[BaseException] = []
    done = threading.Event()
    calls = [0]

    def writer():
        try:
            for i in range(100, len(nodes), 40):
                g.add_nodes("bank", nodes[i : i + 40])
                time.sleep(0.001)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                res = g.spread("bank", seeds, hops=2, decay=0.5, limit=25)
                scores = [s for _, s in res]
                assert 0 < len(res) <= 25
                assert scores == sorted(scores, reverse=True)
                assert {u for u, _ in res} <= universe - seeds.keys()
                st = g.stats("bank")
                assert st["edges"] == st["entity"] + st["temporal"] + st["semantic"] + st["causal"]
                calls[0] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert calls[0] > 0
    fresh = SparseGraphStore()
    fresh.rebuild("bank", nodes)
    assert g.stats("bank") == fresh.stats("bank")
    assert g.spread("bank", seeds, hops=2, decay=0.5, limit=25) == fresh.spread(
        "bank", seeds, hops=2, decay=0.5, limit=25
    )
