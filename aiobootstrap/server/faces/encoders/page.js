// The encoder face's section of the page: the encoder URLs (/list_encoder_urls), each with its health
// (/encoder_url_health), following the list's changes at once; its health read again after a change, and
// (while the tab is seen and there are URLs to probe) when a round of probes found something else: the
// watch carries &findings=M for that. (The host's page: index.html.)
const { api, optional, $, ageText, main } = aiobootstrap;
const section = document.createElement("section");
section.id = "encoders";
section.innerHTML = "<h2>encoder URLs</h2><div id='encoder-count' class='counts muted'></div>"
  + "<ul id='encoder-list' class='urls'></ul>";
main.append(section);

let encoderUrls = [];
let encoderHealth = null;  // the last /encoder_url_health reply (null: not read, or an older server)
let probed = false;        // whether the watch asked for the probes' findings

function encoderLine(e) {
  // Each state says itself in a symbol and words, colour aside.
  if (e.state === "healthy") return ["healthy", "✓ " + e.url + " — healthy (answering /health)"];
  if (e.state === "unprobed") return ["listed", "• " + e.url + " — listed, not probed yet"];
  if (e.state === "failing") {
    return ["failing", "⚠ " + e.url + " — failing (" + e.failures + " failed health check" + (e.failures === 1 ? "" : "s") +
      " in a row; evicted at " + encoderHealth.failures_to_evict + ")"];
  }
  if (e.state === "evicted") {
    if (e.evicted_for === null) return ["evicted", "✗ " + e.url + " — evicted (not listed; still probed)"];
    const seconds = e.evicted_for + (performance.now() - encoderHealth.fetched) / 1000;
    const at = new Date(Date.now() - seconds * 1000).toLocaleTimeString();
    return ["evicted", "✗ " + e.url + " — evicted since " + at + " (" + ageText(seconds) + "; not listed, still probed)"];
  }
  return ["listed", "• " + e.url + " — listed (health not probed" + (e.state === "listed" ? " on this server)" : " yet)")];
}

function renderEncoders() {
  const list = $("encoder-list");
  list.textContent = "";
  const known = encoderHealth ? encoderHealth.encoder_urls : [];
  // A URL the watch listed since health was read: listed, its health not known yet.
  const shown = [...known.filter((e) => e.state === "evicted" || encoderUrls.includes(e.url))];
  for (const url of encoderUrls) if (!known.some((e) => e.url === url)) shown.push({ url, state: "unknown" });
  for (const e of shown) {
    const item = document.createElement("li");
    const [state, text] = encoderLine(e);
    item.className = state;
    item.dataset.state = state;
    item.textContent = text;
    list.appendChild(item);
  }
  const evicted = shown.filter((e) => e.state === "evicted").length;
  $("encoder-count").textContent = encoderUrls.length + " encoder URL" + (encoderUrls.length === 1 ? "" : "s") +
    " listed" + (evicted ? ", " + evicted + " evicted" : "") + " (an encoder that stops answering /health leaves the list)";
}

async function readEncoderHealth() {
  // An older server has no such route: the list alone, health unknown.
  encoderHealth = await optional("/encoder_url_health");
  if (encoderHealth) encoderHealth.fetched = performance.now();
}

aiobootstrap.sections.push({
  kinds: ["encoder_urls"],
  async load() {
    const encoders = await api("/list_encoder_urls");
    encoderUrls = encoders.encoder_urls;
    await readEncoderHealth();
    return encoders.version;
  },
  render: renderEncoders,
  changed(change) {
    if (change.op === "put") { if (!encoderUrls.includes(change.url)) encoderUrls.push(change.url); }
    else encoderUrls = encoderUrls.filter((u) => u !== change.url);
  },
  query(following) {
    // The probes' findings (a URL failing, healthy again), while the page is seen and there are URLs to probe.
    probed = Boolean(following && encoderHealth && encoderHealth.probing && encoderHealth.findings !== undefined
      && (encoderUrls.length || encoderHealth.encoder_urls.length));
    return probed ? "&findings=" + encoderHealth.findings : "";
  },
  async replied(reply, told) {
    if (told || (probed && reply.findings !== encoderHealth.findings)) { await readEncoderHealth(); renderEncoders(); }
  },
  shown() { return readEncoderHealth().then(renderEncoders, () => {}); },
});
