// The vLLM face's section of the page: a namespace's vLLM prefill workers (from /vllm), by dp rank, each
// one's engine and address, and its probes when probed; read again after a watch reply that told a change
// of its workers or claims. Hidden while the namespace holds none. (The host's page: index.html.)
const { optional, $, main } = aiobootstrap;
const section = document.createElement("section");
section.id = "vllm";
section.hidden = true;
section.innerHTML = "<h2>vLLM workers</h2><div id='vllm-count' class='counts muted'></div>"
  + "<ul id='vllm-list' class='urls'></ul>";
main.append(section);

let dirty = false;
async function readVllm() {
  // The namespace's vLLM workers: engine, ranks, side channel, and the probes' failures when probed.
  dirty = false;
  const listing = await optional("/vllm");  // null: an older server
  section.hidden = !listing || !listing.worker_count;
  if (!listing || !listing.worker_count) return;
  $("vllm-count").textContent = listing.worker_count + " worker" + (listing.worker_count === 1 ? "" : "s")
    + " on " + listing.dp_ranks + " dp rank" + (listing.dp_ranks === 1 ? "" : "s")
    + (listing.probing ? " (a worker failing 3 connects in a row leaves)" : " (not probed: --vllm-probe-interval)");
  const list = $("vllm-list");
  list.replaceChildren();
  for (const worker of listing.workers) {
    const item = document.createElement("li");
    const failing = worker.probe_failures > 0;
    const name = "dp" + worker.dp_rank + "-tp" + worker.tp_rank + "-pp" + worker.pp_rank;
    item.className = failing ? "failing" : "";
    item.dataset.worker = name;
    item.textContent = (failing ? "⚠ " : "✓ ") + name + " — " + worker.addr + ", engine " + worker.engine_id
      + (failing ? ", " + worker.probe_failures + " failed connect" + (worker.probe_failures === 1 ? "" : "s") + " in a row" : "");
    list.append(item);
  }
}

aiobootstrap.sections.push({
  kinds: ["vllm_worker", "vllm_claim"],
  load: readVllm,
  changed() { dirty = true; },
  async replied() { if (dirty) await readVllm(); },
});
