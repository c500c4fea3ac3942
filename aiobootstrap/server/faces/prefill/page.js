// The prefill face's section of the page: a namespace's prefill deployment, when it holds one (from
// /prefill), as a grid: one row a dp rank, one cell a (cp, tp, pp) rank, registered or missing, read
// again after a watch reply that told a change of the face's kinds. (The host's page: index.html.)
const { optional, $, main } = aiobootstrap;
const section = document.createElement("section");
section.id = "prefill";
section.hidden = true;
section.innerHTML = "<h2>prefill deployment</h2><div id='prefill-count' class='counts muted'></div>"
  + "<div id='prefill-fields' class='counts muted'></div><div id='prefill-grid'></div>";
main.append(section);

let dirty = false;
async function readPrefill() {
  // The prefill deployment's grid: one row a dp rank, one cell a (cp, tp, pp) rank, registered or missing.
  dirty = false;
  const listing = await optional("/prefill");  // null: an older server
  const topology = listing && listing.topology;
  section.hidden = !topology;
  if (!topology) return;
  const at = new Map(listing.ranks.map((r) => [[r.dp, r.cp, r.tp, r.pp].join("-"), r]));
  $("prefill-count").textContent = listing.registered + " of " + listing.expected + (listing.expected === 1 ? " rank" : " ranks") + " registered (dp "
    + topology.dp_size + " x cp " + topology.cp_size + " x tp " + topology.tp_size + " x pp " + topology.pp_size
    + (listing.complete ? "): complete" : "): " + listing.missing_count + " missing");
  // The fields decode gets back beside the topology (decode_allocation_policy, prefill_http_port...), each
  // value as JSON, cut short: what the prefill ranks told decode.
  const fields = Object.entries(topology.fields || {}).map(([name, value]) => {
    const text = JSON.stringify(value);
    return name + " " + (text.length > 64 ? text.slice(0, 64) + "…" : text);
  });
  $("prefill-fields").textContent = fields.length ? "decode also reads: " + fields.join(", ") : "";
  const grid = $("prefill-grid");
  grid.replaceChildren();
  for (let dp = 0; dp < topology.dp_size && dp < 256; dp++) {
    const row = document.createElement("div");
    row.className = "grid";
    row.setAttribute("aria-label", "dp rank " + dp);
    const label = document.createElement("span");
    label.className = "rowlabel";
    label.textContent = "dp " + dp;
    row.append(label);
    for (let cp = 0; cp < topology.cp_size; cp++) for (let tp = 0; tp < topology.tp_size; tp++)
      for (let pp = 0; pp < topology.pp_size && row.childElementCount <= 1024; pp++) {
        const r = at.get([dp, cp, tp, pp].join("-"));
        const cell = document.createElement("span");
        const name = "dp" + dp + "-cp" + cp + "-tp" + tp + "-pp" + pp;
        cell.className = r ? "cell reg" : "cell";
        cell.textContent = r ? "✓" : "·";
        cell.dataset.prefill = name;
        cell.title = name + (r ? ": registered, " + r.rank_ip + ":" + r.rank_port + ", version " + r.version : ": missing");
        row.append(cell);
      }
    grid.append(row);
  }
}

aiobootstrap.sections.push({
  kinds: ["prefill_rank", "prefill_topology", "prefill_room"],
  load: readPrefill,
  changed() { dirty = true; },
  async replied() { if (dirty) await readPrefill(); },
});
