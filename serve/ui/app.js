// The memory explorer: one ES module, no dependencies. Every value from the API is put into
// the page as text (never as HTML), so a memory cannot inject markup into the explorer.

const KEY = "memlane.apiKey";
const NETWORKS = ["world", "experience", "opinion", "observation"];
const PAGE = 50;

const state = { bank: null, view: "banks", banks: [], entities: null, memOffset: 0, filters: {} };
const $ = (sel) => document.querySelector(sel);

// h("td", {class: "num"}, "3") -> <td class="num">3</td>; children are nodes or text.
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

class APIError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(`${status} ${err.code || ""}: ${err.message || "request failed"}`);
    this.status = status;
  }
}

async function api(path, { method = "GET", body, params } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    for (const one of [].concat(v)) if (one !== "" && one !== null && one !== undefined) url.searchParams.append(k, one);
  }
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await resp.json().catch(() => null);
  if (!resp.ok) {
    if (resp.status === 401) signOut("The key was refused (401). Enter another.");
    throw new APIError(resp.status, data);
  }
  return data;
}

const bankPath = (rest = "") => `/v1/banks/${encodeURIComponent(state.bank)}${rest}`;
const fmtTime = (iso) => (iso ? iso.replace("T", " ").replace(/(\.\d+)?(\+00:00|Z)$/, "") : "");
const fmtNum = (x, digits = 4) => (typeof x === "number" ? x.toFixed(digits) : "");
const typeChip = (t) => h("span", { class: `chip type-${t}` }, t);

function setStatus(msg) {
  $("#status").textContent = msg || "";
}

// --- sign in --------------------------------------------------------------------------------
function signOut(message) {
  sessionStorage.removeItem(KEY);
  for (const id of ["#tabs", "#bank-picker", "#sign-out"]) $(id).hidden = true;
  $("#view").replaceChildren();
  $("#login").hidden = false;
  $("#login-error").textContent = message || "";
  $("#api-key").focus();
}

async function signIn() {
  $("#login").hidden = true;
  try {
    state.banks = (await api("/v1/banks")).banks;
  } catch (e) {
    if (e.status !== 401) signOut(String(e.message));
    return;
  }
  for (const id of ["#tabs", "#bank-picker", "#sign-out"]) $(id).hidden = false;
  const select = $("#bank-select");
  select.replaceChildren(...state.banks.map((b) => h("option", { value: b.bank_id }, b.bank_id)));
  const fromHash = new URLSearchParams(location.hash.slice(1));
  const wanted = fromHash.get("bank");
  state.bank = state.banks.some((b) => b.bank_id === wanted) ? wanted : state.banks[0]?.bank_id ?? null;
  state.view = fromHash.get("view") || "banks";
  if (state.bank) select.value = state.bank;
  show(state.view);
}

// --- navigation ------------------------------------------------------------------------------
const VIEWS = {};

function show(view, extra = {}) {
  state.view = VIEWS[view] ? view : "banks";
  Object.assign(state, extra);
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.view === state.view);
  history.replaceState(null, "", `#bank=${encodeURIComponent(state.bank || "")}&view=${state.view}`);
  setStatus("");
  const root = $("#view");
  root.dataset.view = state.view;
  root.dataset.ready = "false";
  if (!state.bank && state.view !== "banks") {
    root.replaceChildren(h("p", { class: "muted" }, "This key can use no bank yet."));
    return Promise.resolve();
  }
  return VIEWS[state.view](root)
    .then(() => (root.dataset.ready = "true"))
    .catch((e) => {
      setStatus(String(e.message));
      root.dataset.ready = "error";
    });
}

async function entityNames() {
  if (!state.entities || state.entities.bank !== state.bank) {
    const list = (await api(bankPath("/entities"))).entities;
    state.entities = { bank: state.bank, list, byId: new Map(list.map((e) => [e.entity_id, e])) };
  }
  return state.entities;
}

function entityChip(id, names) {
  const e = names.byId.get(id);
  return h("a", { class: "chip entity-link", href: "#", onclick: (ev) => (ev.preventDefault(), show("entities", { entity: id })) }, e ? e.name : id);
}

// --- banks --------------------------------------------------------------------------------------
VIEWS.banks = async (root) => {
  const cards = await Promise.all(
    state.banks.map(async (b) => {
      const s = await api(`/v1/banks/${encodeURIComponent(b.bank_id)}/stats`);
      const graph = Object.entries(s.graph || {}).map(([k, v]) => `${k} ${v}`).join(", ");
      return h(
        "div",
        { class: "card bank-card", dataset: { bank: b.bank_id } },
        h("h3", {}, b.bank_id, b.name ? h("span", { class: "muted" }, ` (${b.name})`) : ""),
        h("table", {},
          h("tr", {}, h("th", {}, "memories"), h("td", { class: "num stat-units" }, s.units)),
          h("tr", {}, h("th", {}, "chunks"), h("td", { class: "num" }, s.chunks)),
          h("tr", {}, h("th", {}, "entities"), h("td", { class: "num" }, s.entities)),
          h("tr", {}, h("th", {}, "graph"), h("td", { class: "mono" }, graph)),
          h("tr", {}, h("th", {}, "updated"), h("td", {}, fmtTime(b.updated_at))),
        ),
        h("button", { onclick: () => selectBank(b.bank_id, "memories") }, "Explore"),
      );
    }),
  );
  root.replaceChildren(h("h2", {}, `Banks (${state.banks.length})`), h("div", { class: "cards" }, cards));
};

function selectBank(bank, view) {
  state.bank = bank;
  state.memOffset = 0;
  state.filters = {};
  $("#bank-select").value = bank;
  show(view || state.view);
}

// --- memories -----------------------------------------------------------------------------------
VIEWS.memories = async (root) => {
  const f = state.filters;
  const names = await entityNames();
  const docs = (await api(bankPath("/documents"))).documents;
  const form = h(
    "form",
    { class: "filters", id: "memory-filters" },
    h("label", {}, "network", h("select", { name: "type", multiple: true, size: 4 },
      NETWORKS.map((t) => h("option", { value: t, selected: (f.type || []).includes(t) }, t)))),
    h("label", {}, "mentioned since (UTC)", h("input", { type: "datetime-local", name: "since", value: f.since || "" })),
    h("label", {}, "until (UTC)", h("input", { type: "datetime-local", name: "until", value: f.until || "" })),
    h("label", {}, "tag", h("input", { name: "tag", value: f.tag || "", placeholder: "tag" })),
    h("label", {}, "document", h("select", { name: "document_id" }, h("option", { value: "" }, "any"),
      docs.map((d) => h("option", { value: d.document_id, selected: f.document_id === d.document_id }, d.document_id)))),
    h("label", {}, "entity", h("select", { name: "entity_id" }, h("option", { value: "" }, "any"),
      names.list.map((e) => h("option", { value: e.entity_id, selected: f.entity_id === e.entity_id }, e.name)))),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "button", onclick: () => ((state.filters = {}), (state.memOffset = 0), show("memories")) }, "Clear"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    state.filters = {
      type: data.getAll("type"),
      since: data.get("since"),
      until: data.get("until"),
      tag: data.get("tag").trim(),
      document_id: data.get("document_id"),
      entity_id: data.get("entity_id"),
    };
    state.memOffset = 0;
    show("memories");
  });
  // datetime-local has no zone: the explorer's times are UTC, as the API's are.
  const asUtc = (v) => (v ? `${v.length === 16 ? `${v}:00` : v}Z` : "");
  const page = await api(bankPath("/memories"), {
    params: {
      offset: state.memOffset,
      limit: PAGE,
      type: f.type || [],
      since: asUtc(f.since),
      until: asUtc(f.until),
      tag: f.tag || "",
      document_id: f.document_id || "",
      entity_id: f.entity_id || "",
    },
  });
  const rows = page.items.map((u) =>
    h("tr", { class: "memory-row", dataset: { id: u.id } },
      h("td", {}, u.text, u.invalid_at ? h("div", { class: "muted" }, `invalidated ${fmtTime(u.invalid_at)}`) : ""),
      h("td", {}, typeChip(u.fact_type)),
      h("td", {}, fmtTime(u.mentioned_at)),
      h("td", { class: "mono" }, u.document_id),
      h("td", {}, u.tags.map((t) => h("span", { class: "chip" }, t))),
      h("td", {}, u.entity_ids.map((id) => entityChip(id, names))),
    ),
  );
  const last = Math.min(page.offset + page.items.length, page.total);
  root.replaceChildren(
    h("h2", {}, `Memories of ${state.bank}`),
    form,
    h("div", { class: "pager" },
      h("span", { id: "memory-count" }, `${page.total ? page.offset + 1 : 0}-${last} of ${page.total}`),
      h("button", { disabled: page.offset === 0, onclick: () => ((state.memOffset = Math.max(0, page.offset - PAGE)), show("memories")) }, "Previous"),
      h("button", { disabled: last >= page.total, onclick: () => ((state.memOffset = page.offset + PAGE), show("memories")) }, "Next"),
    ),
    h("table", { id: "memory-table" },
      h("tr", {}, ["memory", "network", "mentioned", "document", "tags", "entities"].map((c) => h("th", {}, c))),
      rows),
  );
};

// --- recall -------------------------------------------------------------------------------------
VIEWS.recall = async (root) => {
  const out = h("div", { id: "recall-results" });
  const form = h(
    "form",
    { class: "recall-form", id: "recall-form" },
    h("label", {}, "query", h("input", { name: "query", required: true, value: state.query || "" })),
    h("label", {}, "max tokens", h("input", { name: "max_tokens", type: "number", min: 1, value: state.maxTokens || 500 })),
    h("label", {}, "budget", h("select", { name: "budget" }, ["low", "mid", "high"].map((b) => h("option", { value: b, selected: b === "mid" }, b)))),
    // the temporal tree: the planner's choice of levels, or memories only (planner off)
    h("label", {}, "tree", h("select", { name: "planner" }, [["", "planner's levels"], ["off", "memories only"]].map(([v, label]) => h("option", { value: v }, label)))),
    h("button", { type: "submit" }, "Recall"),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    state.query = data.get("query");
    state.maxTokens = Number(data.get("max_tokens"));
    out.replaceChildren(h("p", { class: "muted" }, "recalling..."));
    root.dataset.ready = "false";
    try {
      const result = await api(bankPath("/recall"), {
        method: "POST",
        body: { query: state.query, max_tokens: state.maxTokens, budget: data.get("budget"), trace: true, planner: data.get("planner") || undefined },
      });
      out.replaceChildren(...renderRecall(result, await entityNames()));
      root.dataset.ready = "true";
    } catch (e) {
      out.replaceChildren(h("p", { class: "error" }, String(e.message)));
      root.dataset.ready = "error";
    }
  });
  root.replaceChildren(h("h2", {}, `Recall from ${state.bank}`), form, out);
};

function renderRecall(result, names) {
  const timings = Object.entries(result.timings_ms || {}).map(([k, v]) => `${k} ${v} ms`).join(", ");
  const head = h("p", { class: "muted", id: "recall-summary" },
    `${result.memories.length} memories, ${(result.nodes || []).length} tree nodes, ${result.tokens} tokens`,
    result.query_interval ? `; query time ${fmtTime(result.query_interval[0])} .. ${fmtTime(result.query_interval[1])}` : "",
    timings ? `; ${timings}` : "");
  const items = result.memories.map((m, i) => {
    const t = m.trace || {};
    const channels = Object.entries(t.channels || {});
    const boosts = Object.entries(t.boosts || {});
    return h("div", { class: "result", dataset: { id: m.unit.id } },
      h("div", { class: "text" }, `${i + 1}. `, m.unit.text),
      h("div", { class: "muted" }, typeChip(m.unit.fact_type), ` mentioned ${fmtTime(m.unit.mentioned_at)} · ${m.tokens} tokens · score ${fmtNum(m.score)} · `,
        m.unit.entity_ids.map((id) => entityChip(id, names))),
      h("table", { class: "trace" },
        h("tr", {}, h("th", {}, "channel"), h("th", { class: "num" }, "rank"), h("th", { class: "num" }, "score")),
        channels.map(([name, c]) => h("tr", { class: "trace-channel", dataset: { channel: name } },
          h("td", {}, name), h("td", { class: "num" }, c.rank), h("td", { class: "num" }, fmtNum(c.score)))),
        t.rrf ? h("tr", { class: "trace-fusion" }, h("td", {}, "fusion (RRF)"), h("td", { class: "num" }, t.rrf.rank), h("td", { class: "num" }, fmtNum(t.rrf.score))) : "",
        t.rerank ? h("tr", {}, h("td", {}, `rerank (${t.rerank.model})`), h("td", {}), h("td", { class: "num" }, fmtNum(t.rerank.score))) : "",
        boosts.map(([name, b]) => h("tr", { class: "trace-boost" }, h("td", {}, `boost: ${name}`), h("td", {}), h("td", { class: "num" }, `×${fmtNum(b, 3)}`))),
        "final" in t ? h("tr", {}, h("th", {}, "final"), h("td", {}), h("th", { class: "num" }, fmtNum(t.final))) : "",
      ),
    );
  });
  // Tree nodes take their place in the one ranking of memories and nodes (their rank).
  const ranked = [...items];
  const levelName = (node) => node.level_name || TREE_LEVEL_NAMES[node.level] || String(node.level);
  for (const n of [...(result.nodes || [])].sort((a, b) => a.rank - b.rank)) {
    ranked.splice(Math.min(n.rank, ranked.length), 0,
      h("div", { class: "result tree-result", dataset: { id: n.node.id, level: levelName(n.node) } },
        h("div", { class: "text" }, n.node.text),
        h("div", { class: "muted" }, h("span", { class: "chip" }, levelName(n.node)),
          ` ${fmtTime(n.node.start)} .. ${fmtTime(n.node.end)} · ${n.tokens} tokens · score ${fmtNum(n.score)}`)));
  }
  return [head, ...ranked];
}

// --- entities -----------------------------------------------------------------------------------
VIEWS.entities = async (root) => {
  const names = await entityNames();
  const list = h("table", { id: "entity-table" },
    h("tr", {}, h("th", {}, "entity"), h("th", {}, "type"), h("th", { class: "num" }, "mentions"), h("th", {}, "last seen")),
    names.list.map((e) => h("tr", { class: "entity-row" },
      h("td", {}, entityChip(e.entity_id, names)), h("td", {}, e.type), h("td", { class: "num" }, e.mention_count), h("td", {}, fmtTime(e.last_seen)))));
  const parts = [h("h2", {}, `Entities of ${state.bank} (${names.list.length})`)];
  if (state.entity) {
    try {
      const d = await api(bankPath(`/entities/${encodeURIComponent(state.entity)}`));
      parts.push(
        h("div", { class: "card", id: "entity-detail", dataset: { entity: d.entity.entity_id } },
          h("h3", {}, d.entity.name, h("span", { class: "muted" }, ` ${d.entity.type} · ${d.entity.mention_count} mentions`),
            d.entity.aliases.length ? h("span", { class: "muted" }, ` · aka ${d.entity.aliases.join(", ")}`) : ""),
          h("h3", {}, `Facts (${d.memories.length} of ${d.total})`),
          h("table", { id: "entity-facts" }, d.memories.map((u) => h("tr", {},
            h("td", {}, u.text), h("td", {}, typeChip(u.fact_type)), h("td", {}, fmtTime(u.mentioned_at))))),
          h("h3", {}, `Neighbours (${d.neighbours.length})`),
          d.neighbours.length
            ? h("table", { id: "entity-neighbours" }, h("tr", {}, h("th", {}, "entity"), h("th", { class: "num" }, "shared memories")),
                d.neighbours.map((n) => h("tr", {}, h("td", {}, entityChip(n.entity.entity_id, names)), h("td", { class: "num" }, n.shared))))
            : h("p", { class: "muted", id: "entity-neighbours" }, "No other entity shares a memory with it."),
        ),
      );
    } catch (e) {
      if (e.status !== 404) throw e;
      state.entity = null; // deleted since: show the list
    }
  }
  parts.push(list);
  root.replaceChildren(...parts);
};

// --- timeline -----------------------------------------------------------------------------------
VIEWS.timeline = async (root) => {
  const sessions = (await api(bankPath("/timeline"))).sessions;
  const parts = [h("h2", {}, `Timeline of ${state.bank}`)];
  if (!sessions.length) parts.push(h("p", { class: "muted" }, "No sessions."));
  else {
    const t = (s) => Date.parse(s);
    const lo = Math.min(...sessions.map((s) => t(s.start)));
    const hi = Math.max(...sessions.map((s) => t(s.end)));
    const span = Math.max(hi - lo, 1);
    const rows = sessions.map((s) => {
      const bar = h("div", { class: "tl-bar", title: `${fmtTime(s.start)} .. ${fmtTime(s.end)}` });
      // Element styles set through the DOM: the CSP allows no inline style attribute.
      const left = Math.min(((t(s.start) - lo) / span) * 100, 99.5); // the last bar stays on its track
      bar.style.left = `${left}%`;
      bar.style.width = `${Math.min(Math.max(((t(s.end) - t(s.start)) / span) * 100, 0.5), 100 - left)}%`;
      return h("div", { class: "tl-row", dataset: { document: s.document_id, session: s.session_id } },
        h("a", { class: "mono", href: "#", title: "this document's memories",
          onclick: (ev) => (ev.preventDefault(), show("memories", { filters: { document_id: s.document_id }, memOffset: 0 })) },
          `${s.document_id} / ${s.session_id}`),
        h("div", { class: "tl-track" }, bar),
        h("div", { class: "muted" }, `${fmtTime(s.start)} · ${s.turns} ${s.turns === 1 ? "turn" : "turns"}`));
    });
    parts.push(h("div", { class: "timeline", id: "timeline" },
      h("div", { class: "tl-axis" }, h("span", {}, fmtTime(new Date(lo).toISOString())), h("span", {}, fmtTime(new Date(hi).toISOString()))),
      rows));
  }
  parts.push(await treeSection());
  root.replaceChildren(...parts);
};

// The temporal tree (GET .../tree): one list per level, the profile first, each node with the
// interval it covers and its text.
const TREE_LEVELS = ["profile", "week", "day", "session"];
const TREE_LEVEL_NAMES = { 2: "session", 3: "day", 4: "week", 5: "profile" };
async function treeSection() {
  const nodes = (await api(bankPath("/tree"))).nodes;
  const levels = TREE_LEVELS.filter((lv) => nodes.some((n) => n.level_name === lv));
  const box = h("div", { class: "tree", id: "temporal-tree", dataset: { levels: String(levels.length), nodes: String(nodes.length) } });
  if (!nodes.length) box.append(h("p", { class: "muted" }, "No tree yet: it is built by consolidation (POST .../consolidate, or after retains)."));
  for (const lv of levels) {
    const mine = nodes.filter((n) => n.level_name === lv);
    box.append(h("div", { class: "tree-level", dataset: { level: lv } },
      h("h4", {}, `${lv} (${mine.length})`),
      h("ul", {}, mine.map((n) => h("li", { class: "tree-node", dataset: { id: n.id, level: lv } },
        h("span", { class: "mono tree-interval" }, `${fmtTime(n.start)} .. ${fmtTime(n.end)}`),
        h("span", { class: "muted" }, ` · ${n.children.length} ${n.children.length === 1 ? "child" : "children"}`),
        h("div", { class: "tree-text" }, n.text))))));
  }
  return h("section", {}, h("h3", {}, "Temporal tree"), box);
}

// --- documents ----------------------------------------------------------------------------------
VIEWS.documents = async (root) => {
  const docs = (await api(bankPath("/documents"))).documents;
  root.replaceChildren(
    h("h2", {}, `Documents of ${state.bank} (${docs.length})`),
    h("table", { id: "document-table" },
      h("tr", {}, h("th", {}, "document"), h("th", { class: "num" }, "memories"), h("th", { class: "num" }, "chunks"), h("th", {})),
      docs.map((d) => h("tr", { class: "document-row", dataset: { document: d.document_id } },
        h("td", { class: "mono" }, d.document_id),
        h("td", { class: "num" }, d.units),
        h("td", { class: "num" }, d.chunks),
        h("td", {}, h("button", { class: "danger delete-document", onclick: () => deleteDocument(d) }, "Delete"))))),
  );
};

function confirmDialog(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

async function deleteDocument(d) {
  const ok = await confirmDialog(
    `Delete document "${d.document_id}" from bank "${state.bank}"? Its ${d.units} memories, ${d.chunks} chunks, their links and the entities only it named are removed. This cannot be undone.`,
  );
  if (!ok) return;
  try {
    const counts = await api(bankPath(`/documents/${encodeURIComponent(d.document_id)}`), { method: "DELETE" });
    state.entities = null;
    await show("documents");
    $("#view").prepend(h("p", { id: "deleted-note" }, `Deleted ${d.document_id}: ${counts.units} memories, ${counts.chunks} chunks.`));
  } catch (e) {
    setStatus(String(e.message));
  }
}

// --- start ----------------------------------------------------------------------------------------
$("#login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $("#api-key").value.trim());
  $("#api-key").value = "";
  signIn();
});
$("#sign-out").addEventListener("click", () => signOut(""));
$("#bank-select").addEventListener("change", (ev) => selectBank(ev.target.value));
for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => show(b.dataset.view, { entity: null }));

if (sessionStorage.getItem(KEY)) signIn();
else signOut("");
