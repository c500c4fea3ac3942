// The Mooncake face's section of the page: a namespace's Mooncake engines (from /mooncake), each one's
// RPC address beside its segment, and its probes when probed; read again after a watch reply that told a
// change of its metadata. Hidden while the namespace holds none. (The host's page: index.html.)
const { optional, $, main } = aiobootstrap;
const section = document.createElement("section");
section.id = "mooncake";
section.hidden = true;
section.innerHTML = "<h2>Mooncake engines</h2><div id='mooncake-count' class='counts muted'></div>"
  + "<ul id='mooncake-list' class='urls'></ul>";
main.append(section);

let dirty = false;
async function readMooncake() {
  // The namespace's Mooncake engines: each one's RPC address, its segment, and its probes when probed.
  dirty = false;
  const listing = await optional("/mooncake");  // null: an older server
  section.hidden = !listing || !listing.keys;
  if (!listing || !listing.keys) return;
  $("mooncake-count").textContent = listing.engine_count + " engine" + (listing.engine_count === 1 ? "" : "s")
    + ", " + listing.keys + " key" + (listing.keys === 1 ? "" : "s")
    + (listing.probing ? " (an engine failing 3 probes in a row leaves)" : " (not probed: --mooncake-probe-interval)");
  const list = $("mooncake-list");
  list.replaceChildren();
  for (const engine of listing.engines) {
    const item = document.createElement("li");
    const failing = engine.probe_failures > 0;
    item.className = failing ? "failing" : "";
    item.dataset.engine = engine.name;
    const rpc = engine.rpc ? engine.rpc.ip_or_host_name + ":" + engine.rpc.rpc_port : "no RPC address";
    const segment = engine.segment ? "segment" + (engine.buffers === null ? "" : ", " + engine.buffers + " buffer"
      + (engine.buffers === 1 ? "" : "s")) + (engine.protocol ? " (" + engine.protocol + ")" : "") : "no segment yet";
    item.textContent = (failing ? "⚠ " : engine.segment && engine.rpc ? "✓ " : "• ") + engine.name + " — RPC " + rpc
      + ", " + segment + (failing ? ", " + engine.probe_failures + " failed probe" + (engine.probe_failures === 1 ? "" : "s") + " in a row" : "");
    list.append(item);
  }
}

aiobootstrap.sections.push({
  kinds: ["metadata"],
  load: readMooncake,
  changed() { dirty = true; },
  async replied() { if (dirty) await readMooncake(); },
});
