"""The memory explorer end to end: the API it reads (memory filters, an entity's facts and
neighbours, the timeline) over HTTP, and the page itself in headless Chromium, against one
live `memlane serve` on loopback (real Ray Serve, Milvus Lite, MiniLM, spaCy): the service
it shares with the other modules on the defaults (tests/serving/conftest.py), its banks
alice and api.

Screenshots of each page land in test-artifacts/explorer/ (gitignored)."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "explorer"
# keys (tests/serving/conftest.py DEFAULT_KEYS): k-alice (bank alice), k-admin (every bank)
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def _seed(http: httpx.Client, bank: str) -> None:
    """Three documents: two sessions of a chat a week apart (tags per document), a note a
    month later."""
    assert http.put(f"/v1/banks/{bank}", json={"name": ""}).status_code in (200, 201)
    docs = [
        (
            "chat-1",
            ["chat"],
            [
                ("Bob and I hiked near Lisbon.", "s1", T0),
                ("Bob cooked dinner for Carla.", "s1", T0 + timedelta(minutes=5)),
            ],
        ),
        ("chat-move", ["chat", "move"], [("Carla moved to Berlin in March.", "s2", T0 + timedelta(days=7))]),
        ("note-cello", [], [("I started learning the cello.", "s3", T0 + timedelta(days=30))]),
    ]
    for doc_id, tags, turns in docs:
        items = [
            {"content": c, "speaker": "Alice", "session_id": s, "timestamp": t.isoformat()}
            for c, s, t in turns
        ]
        r = http.post(
            f"/v1/banks/{bank}/memories", json={"items": items, "document_id": doc_id, "tags": tags}
        )
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def service(default_service):
    with _http(default_service) as http:
        _seed(http, "alice")
        _seed(http, "api")
    return default_service


def _http(service, key="k-admin"):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=service["url"], headers=headers, timeout=120)


def _client(service, key="k-admin"):
    from memlane_client import MemlaneClient

    return MemlaneClient(service["url"], key, timeout=120)


def _texts(page):
    return sorted(m["text"].split(": ", 1)[1] for m in page["items"])


def _entities(http, bank):
    return {e["name"]: e["entity_id"] for e in http.get(f"/v1/banks/{bank}/entities").json()["entities"]}


# --- the API the explorer reads ----------------------------------------------------------------
def test_memories_filter_by_tag_time_and_entity_over_http(service):
    with _http(service) as http:
        mems = "/v1/banks/api/memories"
        page = http.get(mems, params={"tag": "move"}).json()
        assert page["total"] == 1 and _texts(page) == ["Carla moved to Berlin in March."]
        assert http.get(mems, params={"tag": ["chat", "move"], "tags_match": "all"}).json()["total"] == 1
        assert http.get(mems, params={"tag": ["chat", "move"]}).json()["total"] == 3
        window = {
            "since": (T0 + timedelta(minutes=5)).isoformat(),
            "until": (T0 + timedelta(days=7)).isoformat(),
        }
        assert _texts(http.get(mems, params=window).json()) == ["Bob cooked dinner for Carla."]
        bob = _entities(http, "api")["Bob"]
        # the bank has no owner name, so Alice's turns are world facts (README: a bank's name)
        page = http.get(mems, params={"entity_id": bob, "type": "world"}).json()
        assert _texts(page) == ["Bob and I hiked near Lisbon.", "Bob cooked dinner for Carla."]
        assert http.get(mems, params={"entity_id": bob, "type": "experience"}).json()["total"] == 0
    with _client(service) as m:  # the SDK's filters
        assert m.list_memories("api", tags=["move"], since=T0)["total"] == 1
        assert m.list_memories("api", until=T0 + timedelta(minutes=1))["total"] == 1
        assert m.get_entity("api", bob, limit=1)["total"] == 2
        assert [s["document_id"] for s in m.timeline("api")] == ["chat-1", "chat-move", "note-cello"]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"since": "yesterday"}, "since"),
        ({"since": T0.isoformat(), "until": T0.isoformat()}, "until"),
        ({"tag": " "}, "tag"),
        ({"tags_match": "most"}, "tags_match"),
        ({"entity_id": ""}, "entity_id"),
    ],
)
def test_bad_memory_filters_are_422_naming_the_field(service, params, field):
    with _http(service) as http:
        r = http.get("/v1/banks/api/memories", params=params)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_entity_route_gives_facts_and_neighbours(service):
    with _http(service) as http:
        carla = _entities(http, "api")["Carla"]
        body = http.get(f"/v1/banks/api/entities/{carla}").json()
        assert body["entity"]["name"] == "Carla" and body["total"] == 2
        assert [m["text"].split(": ", 1)[1] for m in body["memories"]] == [
            "Bob cooked dinner for Carla.",
            "Carla moved to Berlin in March.",
        ]
        assert "embedding" not in body["memories"][0]
        shared = {n["entity"]["name"]: n["shared"] for n in body["neighbours"]}
        assert shared.get("Bob") == 1 and shared.get("Berlin") == 1 and "Carla" not in shared
        assert len(http.get(f"/v1/banks/api/entities/{carla}", params={"limit": 1}).json()["memories"]) == 1
        missing = http.get("/v1/banks/api/entities/nope")
        assert missing.status_code == 404 and missing.json()["error"]["field"] == "entity_id"
        assert http.get(f"/v1/banks/api/entities/{carla}", params={"limit": 0}).status_code == 422
    with _http(service, "k-alice") as http:  # another bank's entity: refused before lookup
        assert http.get(f"/v1/banks/api/entities/{carla}").status_code == 403


def test_timeline_route_lists_sessions_in_time_order(service):
    with _http(service) as http:
        sessions = http.get("/v1/banks/api/timeline").json()["sessions"]
    assert [(s["document_id"], s["session_id"], s["turns"]) for s in sessions] == [
        ("chat-1", "s1", 2),
        ("chat-move", "s2", 1),
        ("note-cello", "s3", 1),
    ]
    assert datetime.fromisoformat(sessions[1]["start"]) == T0 + timedelta(days=7)


def test_the_ray_dashboard_answers_on_loopback_when_serve_asks_for_it(service):
    # This module's service was started with --ray-dashboard (tests/serving/conftest.py).
    url = service["dashboard_url"]
    assert url and url.startswith("http://127.0.0.1:"), service
    page = httpx.get(url, timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_ui_assets_are_served_with_security_headers(service):
    with _http(service, key=None) as http:
        page = http.get("/ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        bare = http.get("/ui")  # the same page, no redirect; its assets' URLs are absolute
        assert bare.status_code == 200 and bare.text == page.text
        assert bare.headers["content-security-policy"] == page.headers["content-security-policy"]
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert '<script type="module" src="/ui/app.js">' in page.text
        assert '<link rel="stylesheet" href="/ui/style.css">' in page.text
        js = http.get("/ui/app.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert http.get("/ui/style.css").headers["content-type"].startswith("text/css")
        for bad in ("/ui/explorer.py", "/ui/..%2Fingress.py", "/ui/%2e%2e%2fingress.py"):
            r = http.get(bad)
            assert r.status_code == 404, bad
            assert "import" not in r.text


def _same_origin_urls(html: str) -> list[str]:
    """The URLs a page loads (src, href, its schema URL); each must be a path on this service."""
    import re

    urls = re.findall(r'(?:src|href|spec-url)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
    assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    return urls


def test_api_docs_pages_load_every_asset_from_the_service(service):
    with _http(service, key=None) as http:
        for page_url, kinds in (
            ("/docs", {"text/css", "image/png", "text/javascript", "application/json"}),
            ("/redoc", {"image/png", "text/javascript", "application/json"}),
        ):
            page = http.get(page_url)
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            seen = set()
            for url in _same_origin_urls(page.text):
                r = http.get(url)
                assert r.status_code == 200 and r.content, url
                seen.add(r.headers["content-type"].split(";")[0])
            assert seen == kinds, (page_url, seen)
        assert "/v1/banks/{bank_id}/recall" in http.get("/openapi.json").json()["paths"]
        for bad in ("/docs/assets/core.py", "/docs/assets/..%2F__init__.py", "/docs/assets/nope.js"):
            assert http.get(bad).status_code == 404, bad


# --- the page in a real browser ----------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not binary.exists():
            message = (
                f"{binary} is missing: apt-get install chromium chromium-driver (make test does, as root)"
            )
            if os.environ.get("MEMLANE_REQUIRE_BROWSER") == "1":  # .ci/run: the test must run
                pytest.fail(message)
            pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="memlane-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, predicate, timeout=120):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: predicate(d))


def _ready(driver, view):
    from selenium.webdriver.common.by import By

    def check(d):
        root = d.find_element(By.ID, "view")
        state = root.get_attribute("data-ready")
        assert state != "error", d.find_element(By.ID, "status").text
        return root.get_attribute("data-view") == view and state == "true"

    _wait(driver, check)


def _tab(driver, view):
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'#tabs button[data-view="{view}"]').click()
    _ready(driver, view)


def _shot(driver, name):
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_api_docs_render_in_chromium_from_this_origin_only(service, browser):
    """Swagger UI draws the operations, every resource the page loaded came from the service
    (the test machine has no internet: a CDN asset would have left the page blank)."""
    from selenium.webdriver.common.by import By

    d = browser
    d.get(service["url"] + "/docs")
    _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, '.opblock [data-path="/v1/banks/{bank_id}/recall"]'))
    resources = d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(u.startswith(service["url"] + "/") for u in resources), resources
    _shot(d, "00-api-docs")


def test_explorer_in_chromium(service, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = browser
    by_css = lambda sel: d.find_elements(By.CSS_SELECTOR, sel)  # noqa: E731
    with _http(service, "k-alice") as http:
        units = http.get("/v1/banks/alice/stats").json()["units"]
        entity_ids = _entities(http, "alice")
        # the temporal tree the timeline shows (its windows are all in the past: all closed)
        assert http.post("/v1/banks/alice/consolidate").status_code == 200
        tree = http.get("/v1/banks/alice/tree").json()["nodes"]

    # 1. the key is asked for; a wrong one is refused and asked for again
    d.get(service["url"] + "/ui")
    _wait(d, lambda d: d.find_element(By.ID, "login").is_displayed())
    assert not d.find_element(By.ID, "tabs").is_displayed()
    _shot(d, "01-key")
    d.find_element(By.ID, "api-key").send_keys("k-wrong")
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    _wait(d, lambda d: "401" in d.find_element(By.ID, "login-error").text)
    assert d.execute_script("return sessionStorage.getItem('memlane.apiKey')") is None

    # 2. with the key: the banks it may use, with their stats
    d.find_element(By.ID, "api-key").send_keys("k-alice")
    d.find_element(By.CSS_SELECTOR, "#login-form button").click()
    _ready(d, "banks")
    assert d.execute_script("return sessionStorage.getItem('memlane.apiKey')") == "k-alice"
    cards = by_css(".bank-card")
    assert [c.get_attribute("data-bank") for c in cards] == ["alice"]  # not "api": the key's banks only
    assert cards[0].find_element(By.CSS_SELECTOR, ".stat-units").text == str(units)
    _shot(d, "02-banks")

    # 3. memories, then filtered by tag
    _tab(d, "memories")
    assert len(by_css(".memory-row")) == units
    tag = d.find_element(By.CSS_SELECTOR, '#memory-filters input[name="tag"]')
    tag.send_keys("move")
    d.find_element(By.CSS_SELECTOR, '#memory-filters button[type="submit"]').click()
    _ready(d, "memories")
    rows = by_css(".memory-row")
    assert len(rows) == 1 and "Carla moved to Berlin" in rows[0].text
    assert d.find_element(By.ID, "memory-count").text == "1-1 of 1"
    _shot(d, "03-memories")

    # 4. recall: the retained fact first, with its trace (channels, fusion, boosts); memories
    # only (the tree's nodes may stand in for the memories they quote: see 4b)
    _tab(d, "recall")
    d.find_element(By.CSS_SELECTOR, '#recall-form input[name="query"]').send_keys("Where did Carla move?")
    Select(d.find_element(By.CSS_SELECTOR, '#recall-form select[name="planner"]')).select_by_value("off")
    d.find_element(By.CSS_SELECTOR, '#recall-form button[type="submit"]').click()
    _ready(d, "recall")
    results = by_css(".result")
    assert (
        results
        and "Carla moved to Berlin in March." in results[0].find_element(By.CSS_SELECTOR, ".text").text
    )
    channels = results[0].find_elements(By.CSS_SELECTOR, ".trace-channel")
    assert {c.get_attribute("data-channel") for c in channels} >= {"semantic", "lexical"}
    shown = {}
    for row in channels:
        rank, score = (td.text for td in row.find_elements(By.CSS_SELECTOR, "td.num"))
        shown[row.get_attribute("data-channel")] = (int(rank), float(score))
    assert all(rank >= 1 for rank, _ in shown.values())
    assert shown["semantic"][1] > 0.0
    assert results[0].find_element(By.CSS_SELECTOR, ".trace-fusion").text.startswith("fusion (RRF)")
    boosts = results[0].find_elements(By.CSS_SELECTOR, ".trace-boost")
    assert len(boosts) == 4  # recency, temporal, proof, salience
    _shot(d, "04-recall")

    # 4b. with the planner's levels: the tree's nodes in their place in the one ranking, as
    # the API answers the same request
    Select(d.find_element(By.CSS_SELECTOR, '#recall-form select[name="planner"]')).select_by_value("")
    d.find_element(By.CSS_SELECTOR, '#recall-form button[type="submit"]').click()
    _ready(d, "recall")
    with _http(service, "k-alice") as http:
        body = {"query": "Where did Carla move?", "max_tokens": 500, "budget": "mid", "trace": True}
        answer = http.post("/v1/banks/alice/recall", json=body).json()
    ranking: list = [("memory", m["unit"]["id"]) for m in answer["memories"]]
    for n in sorted(answer["nodes"], key=lambda n: n["rank"]):
        ranking.insert(min(n["rank"], len(ranking)), ("node", n["node"]["id"]))
    shown_ranking = [
        ("node" if "tree-result" in r.get_attribute("class") else "memory", r.get_attribute("data-id"))
        for r in by_css(".result")
    ]
    assert shown_ranking == ranking and ranking
    assert d.find_element(By.ID, "recall-summary").text.startswith(
        f"{len(answer['memories'])} memories, {len(answer['nodes'])} tree nodes"
    )
    _shot(d, "04b-recall-tree")

    # 5. an entity: its facts and neighbours (opened from the entity list)
    _tab(d, "entities")
    link = [a for a in by_css("#entity-table .entity-link") if a.text == "Carla"][0]
    link.click()
    _wait(d, lambda d: d.find_elements(By.ID, "entity-detail"))
    _ready(d, "entities")
    detail = d.find_element(By.ID, "entity-detail")
    assert detail.get_attribute("data-entity") == entity_ids["Carla"]
    facts = detail.find_element(By.ID, "entity-facts").text
    assert "Bob cooked dinner for Carla." in facts and "Carla moved to Berlin in March." in facts
    neighbours = detail.find_element(By.ID, "entity-neighbours").text
    assert "Bob" in neighbours and "Berlin" in neighbours
    _shot(d, "05-entity")

    # 6. the timeline: one row per session in time order, and the temporal tree above them
    _tab(d, "timeline")
    rows = by_css(".tl-row")
    assert [(r.get_attribute("data-document"), r.get_attribute("data-session")) for r in rows] == [
        ("chat-1", "s1"),
        ("chat-move", "s2"),
        ("note-cello", "s3"),
    ]
    lefts = [
        float(r.find_element(By.CSS_SELECTOR, ".tl-bar").value_of_css_property("left")[:-2]) for r in rows
    ]
    assert lefts[0] < lefts[1] < lefts[2]  # the bars are placed by time (CSP let the script style them)
    # the tree: a list per level, the profile first, each node with its interval
    box = d.find_element(By.ID, "temporal-tree")
    assert box.get_attribute("data-levels") == "4"
    shown = [(n.get_attribute("data-level"), n.get_attribute("data-id")) for n in by_css(".tree-node")]
    order = ["profile", "week", "day", "session"]
    assert shown == sorted(((n["level_name"], n["id"]) for n in tree), key=lambda x: order.index(x[0]))
    assert [lv for lv, _ in shown].count("session") == 3  # one per seeded session
    sessions = [n for n in by_css(".tree-node") if n.get_attribute("data-level") == "session"]
    assert (
        sessions[0].find_element(By.CSS_SELECTOR, ".tree-interval").text
        == "2024-05-01 10:00:00 .. 2024-05-01 10:05:00"
    )
    _shot(d, "06-timeline")
    [link] = [a for a in by_css(".tl-row a") if a.text == "chat-move / s2"]
    link.click()  # a session's document opens its memories
    _ready(d, "memories")
    rows = by_css(".memory-row")
    assert len(rows) == 1 and "Carla moved to Berlin" in rows[0].text

    # 7. delete a document: asked first; cancel keeps it, confirm deletes it
    _tab(d, "documents")

    def delete_button():
        row = [r for r in by_css(".document-row") if r.get_attribute("data-document") == "note-cello"][0]
        return row.find_element(By.CSS_SELECTOR, ".delete-document")

    delete_button().click()
    dialog = d.find_element(By.ID, "confirm")
    _wait(d, lambda d: dialog.is_displayed())
    assert 'Delete document "note-cello"' in d.find_element(By.ID, "confirm-text").text
    _shot(d, "07-delete-confirm")
    d.find_element(By.ID, "confirm-cancel").click()
    _wait(d, lambda d: not dialog.is_displayed())
    with _http(service, "k-alice") as http:
        docs = {x["document_id"] for x in http.get("/v1/banks/alice/documents").json()["documents"]}
    assert "note-cello" in docs
    delete_button().click()
    _wait(d, lambda d: dialog.is_displayed())
    d.find_element(By.ID, "confirm-ok").click()
    _wait(d, lambda d: d.find_elements(By.ID, "deleted-note"))
    assert "Deleted note-cello" in d.find_element(By.ID, "deleted-note").text
    assert "note-cello" not in [r.get_attribute("data-document") for r in by_css(".document-row")]
    with _http(service, "k-alice") as http:
        docs = {x["document_id"] for x in http.get("/v1/banks/alice/documents").json()["documents"]}
    assert docs == {"chat-1", "chat-move"}
    _shot(d, "08-deleted")

    # No script error and no Content-Security-Policy violation on the way (the 401 of the
    # wrong key is the one expected failure).
    severe = [
        e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE" and "401" not in e["message"]
    ]
    assert severe == []
