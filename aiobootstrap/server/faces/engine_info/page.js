// The engine-info face's section of the page: for each per-rank kind and role that holds records
// (transfer-engine info of role target always), a heading, the counts, a progress bar and a grid, one
// cell per rank, from /ranks; a change shows on its cell at once, and the listing is read again shortly
// after for session id, age and lease. And the waits parked on each rank. (The host's page: index.html.)
const { api, $, ageText, main, detail } = aiobootstrap;
const KINDS = ["transfer_engine_info", "parallelism_config"];
const CELL_LIMIT = 8192;   // above it a group is drawn as runs of ranks in one state
const groups = new Map();  // "kind/role" -> group
const box = document.createElement("div");
box.id = "groups";
main.append(box);

function group(kind, role) {
  const key = kind + "/" + role;
  let g = groups.get(key);
  if (!g) {
    g = { kind, role, ranks: new Map(), world: null, waiters: 0, waiting: [], dirty: false, el: null };
    groups.set(key, g);
  }
  return g;
}

function stateOf(g, rank) {
  const r = g.ranks.get(rank);
  if (!r) return "missing";
  if (r.lease_remaining !== undefined) {
    const left = r.lease_remaining - (performance.now() - r.fetched) / 1000;
    // Half its TTL gone (the server sends the TTL: a page opened late into a dead worker's lease knows it).
    if (left < Math.max(1, 0.5 * (r.lease_ttl || 0))) return "lease running out";
  }
  return "registered";
}
function parseRanks(spec) {
  return spec.split(",").map((part) => { const [a, b] = part.split("-").map(Number); return [a, b === undefined ? a : b]; });
}
function waitingRanges(byRank) {
  // The listing's waiters_by_rank as [first, last, count], sorted: disjoint, for each rank is in one set.
  const ranges = [];
  for (const [spec, count] of Object.entries(byRank || {})) for (const [a, b] of parseRanks(spec)) ranges.push([a, b, count]);
  return ranges.sort((x, y) => x[0] - y[0]);
}
function waitingOn(g, rank) {
  // A binary search: a cell's paint costs log(ranges), however many ranks are waited for.
  let lo = 0, hi = g.waiting.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1, [a, b, count] = g.waiting[mid];
    if (rank < a) hi = mid - 1; else if (rank > b) lo = mid + 1; else return count;
  }
  return 0;
}
function waitText(count) { return count ? ", " + count + (count === 1 ? " wait" : " waits") + " parked on it" : ""; }
const SYMBOL = { registered: "✓", missing: "·", "lease running out": "!" };
const CLASS = { registered: "cell reg", missing: "cell", "lease running out": "cell exp" };

function label(g, rank) {
  const state = stateOf(g, rank), r = g.ranks.get(rank);
  let text = "rank " + rank + ": " + state + waitText(waitingOn(g, rank));
  if (r) {
    const age = (r.age || 0) + (performance.now() - (r.seen || r.fetched)) / 1000;
    if (r.session_id !== undefined) text += ", session " + (r.session_id || "(none)");
    if (r.backend) text += ", backend " + r.backend;
    text += ", version " + r.version + ", age " + ageText(age);
    if (r.lease_remaining !== undefined) {
      const left = Math.max(0, r.lease_remaining - (performance.now() - r.fetched) / 1000);
      text += ", lease " + left.toFixed(1) + " s left of " + r.lease_ttl + " s";
    }
  }
  return text;
}

function paintCell(cell, g, rank) {
  const state = stateOf(g, rank), waits = waitingOn(g, rank);
  cell.className = CLASS[state] + (waits ? " waited" : "");
  // A missing rank someone waits for shows how many (a digit, not only the marker's colour).
  cell.textContent = waits && state === "missing" ? (waits > 9 ? "+" : String(waits)) : SYMBOL[state];
  const text = label(g, rank);
  cell.title = text;
  cell.setAttribute("aria-label", text);
}

function shownRanks(g) {
  if (g.world !== null) return null;  // 0 .. world-1
  return [...g.ranks.keys()].sort((a, b) => a - b);
}

function renderGroup(g) {
  if (!g.el) {
    g.el = document.createElement("section");
    g.el.innerHTML = "<h2></h2><div class='counts'></div><progress max='1' value='0'></progress>" +
      "<div class='grid' role='list'></div>";
    g.el.dataset.kind = g.kind; g.el.dataset.role = g.role;
    box.appendChild(g.el);
    const grid = g.el.querySelector(".grid");
    const show = (event) => {
      const t = event.target.closest("[title]");
      if (!t) return;
      if (t.dataset.rank !== undefined) paintCell(t, g, Number(t.dataset.rank));  // its age now
      detail(t.title);
    };
    grid.addEventListener("mouseover", show); grid.addEventListener("click", show);
    grid.addEventListener("focusin", show);
  }
  g.el.querySelector("h2").textContent = g.kind + " · " + g.role;
  renderCounts(g);
  const grid = g.el.querySelector(".grid");
  const listed = shownRanks(g);
  const total = listed ? listed.length : g.world;
  grid.textContent = "";
  g.cells = null;
  if (total <= CELL_LIMIT) {
    const fragment = document.createDocumentFragment();
    g.cells = new Map();
    for (let i = 0; i < total; i++) {
      const rank = listed ? listed[i] : i;
      const cell = document.createElement("span");
      cell.setAttribute("role", "listitem");
      cell.tabIndex = -1;
      cell.dataset.rank = rank;
      paintCell(cell, g, rank);
      g.cells.set(rank, cell);
      fragment.appendChild(cell);
    }
    grid.appendChild(fragment);
  } else {
    renderRuns(g, grid);
  }
}

function renderRuns(g, grid) {
  // Runs of consecutive ranks in one state: a few elements, whatever the world size.
  const fragment = document.createDocumentFragment();
  let world = g.world;
  if (world === null) { world = 0; for (const r of g.ranks.keys()) world = Math.max(world, r + 1); }  // to the last
  let start = 0, state = stateOf(g, 0), waits = waitingOn(g, 0);
  const flush = (end) => {
    const run = document.createElement("span");
    run.className = CLASS[state].replace("cell", "run") + (waits ? " waited" : "");
    run.setAttribute("role", "listitem");
    const span = start === end - 1 ? "rank " + start : "ranks " + start + "-" + (end - 1);
    run.title = span + ": " + state + " (" + (end - start) + ")" + (waits ? ", " + waits + " waiting on each" : "");
    run.setAttribute("aria-label", run.title);
    run.textContent = SYMBOL[state] + (waits ? "⏳" + waits : "") + " " + (start === end - 1 ? start : start + "-" + (end - 1));
    run.style.flexGrow = String(Math.max(1, Math.round(200 * (end - start) / world)));
    fragment.appendChild(run);
  };
  // Walk only where the state can change: the registered ranks and their neighbours.
  const marks = [...g.ranks.keys()].filter((r) => r < world).sort((a, b) => a - b);
  const edges = new Set([0]);
  for (const r of marks) { edges.add(r); if (r + 1 < world) edges.add(r + 1); }
  for (const [a, b] of g.waiting) { if (a < world) edges.add(a); if (b + 1 < world) edges.add(b + 1); }
  for (const r of [...edges].sort((a, b) => a - b)) {
    const s = stateOf(g, r), n = waitingOn(g, r);
    if (s !== state || n !== waits) { flush(r); start = r; state = s; waits = n; }
  }
  flush(world);
  grid.appendChild(fragment);
}

function renderCounts(g) {
  const registered = g.world === null ? g.ranks.size : [...g.ranks.keys()].filter((r) => r < g.world).length;
  let text = registered + " registered";
  if (g.world !== null) text += " of world size " + g.world + " · " + (g.world - registered) + " missing";
  let waited = 0;
  for (const [a, b] of g.waiting) waited += b - a + 1;
  text += " · " + g.waiters + " waiting in the namespace, on " + waited + " rank" + (waited === 1 ? "" : "s") + " here";
  const counts = g.el.querySelector(".counts");
  counts.textContent = text;
  const bar = g.el.querySelector("progress");
  bar.max = g.world || Math.max(1, registered); bar.value = registered;
  bar.setAttribute("aria-label", g.kind + " " + g.role + ": " + text);
}

function showChange(g, rank, record) {
  // A cell is painted at once; anything else (runs, a new rank without a world size) once per reply.
  if (record) g.ranks.set(rank, record); else g.ranks.delete(rank);
  if (g.cells && g.cells.has(rank)) paintCell(g.cells.get(rank), g, rank);
  else g.redraw = true;
  g.recount = true;
}

function redrawTouched() {
  for (const g of groups.values()) {
    if (g.redraw && (g.el || wanted(g))) renderGroup(g);
    else if (g.recount && g.el) renderCounts(g);
    g.redraw = g.recount = false;
  }
}

async function readGroup(g, { enrich = false } = {}) {
  // enrich: only the details of the ranks already shown are taken (who is in is the watch's to say:
  // a change that came while this was read must not be undone by it); else the listing is the truth.
  g.dirty = false;
  const listing = await api("/ranks?kind=" + g.kind + "&role=" + encodeURIComponent(g.role));
  const now = performance.now();
  const ranks = enrich ? g.ranks : new Map();
  for (const r of listing.ranks) {
    const old = g.ranks.get(r.rank);
    if (enrich && (!old || old.version > r.version)) continue;
    r.fetched = now;
    ranks.set(r.rank, r);
  }
  g.ranks = ranks; g.world = listing.world_size; g.waiters = listing.waiters;
  g.waiting = waitingRanges(listing.waiters_by_rank);
  return listing.version;
}

// A group is drawn once it holds a rank or a wait, or for transfer-engine info of a known world size (its
// missing ranks are the news); not as an empty grid in a namespace of another face (a PD or Mooncake one).
function wanted(g) { return g.ranks.size > 0 || g.waiters > 0 || g.world !== null && g.kind === "transfer_engine_info"; }

let refreshing = false, nextRefresh = 0;
async function refreshDirty() {
  // The listings of changed (or leased) groups read again, for session ids, ages and leases: one read at
  // a time, and after a slow one (a large listing) a pause ten times as long, so the page stays light.
  if (refreshing || performance.now() < nextRefresh) return;
  refreshing = true;
  const began = performance.now();
  try {
    for (const g of groups.values()) {
      const leased = [...g.ranks.values()].some((r) => r.lease_remaining !== undefined);
      if (g.dirty || leased) { await readGroup(g, { enrich: true }); renderGroup(g); }
    }
  } finally {
    refreshing = false;
    nextRefresh = performance.now() + 10 * (performance.now() - began);
  }
}

aiobootstrap.sections.push({
  kinds: KINDS,
  async load(kept) {
    // The roles there are: those the kept history names (none to learn when it is gone), and target.
    const roles = new Set(KINDS.map((k) => k + "/target"));
    for (const c of kept || []) if (c.role !== undefined && KINDS.includes(c.kind)) roles.add(c.kind + "/" + c.role);
    for (const g of groups.values()) roles.add(g.kind + "/" + g.role);
    let low = Infinity;
    for (const key of roles) {
      const cut = key.indexOf("/");  // a kind has no "/"; a role may
      low = Math.min(low, await readGroup(group(key.slice(0, cut), key.slice(cut + 1))));
    }
    return low;
  },
  render() {
    for (const g of groups.values()) if (wanted(g) || g.el) renderGroup(g);
  },
  changed(change) {
    const g = group(change.kind, change.role);
    if (change.op === "put") {
      const old = g.ranks.get(change.rank) || {};
      showChange(g, change.rank, { ...old, rank: change.rank, version: change.version, age: 0,
        seen: performance.now(), lease_remaining: undefined });
      g.dirty = true;
    } else {
      showChange(g, change.rank, null);
    }
  },
  replied(reply, told) { if (told) redrawTouched(); },
  async waitsMoved(count) {
    for (const g of groups.values()) {
      if (count === 0) {  // nobody waits: nothing to read
        if (g.waiting.length || g.waiters) { g.waiting = []; g.waiters = 0; if (g.el) renderGroup(g); }
        continue;
      }
      await readGroup(g, { enrich: true });
      if (g.el || wanted(g)) renderGroup(g);
    }
  },
  tick: refreshDirty,
});
