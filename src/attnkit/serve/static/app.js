// attnkit attention explorer: plain JS + SVG, no framework, nothing loaded from elsewhere.
"use strict";

const V = window.attnkitViews;  // the shared drawing code: /static/heatmap.js (attnkit/views/static)
const { el, color, heatmap, showTip, hideTip, visible } = V;
const $ = (id) => document.getElementById(id);
// the page's language (the server picked it: ?lang=, else the browser's Accept-Language) and
// its words: t(English, {fields}) from the table the server embedded in the page
const LANG = document.documentElement.dataset.language || "en";
const t = V.translator(JSON.parse($("attnkit-i18n").textContent || "{}"));
const headLabel = (h) => (h === "mean" ? t("mean of heads") : t("head {n}", { n: Number(h) + 1 }));
const where = (layer, head) => t("layer {layer}, {head}", { layer: layer + 1, head: headLabel(head) });
const layerOptions = (L) => Array.from({ length: L }, (_, i) => [String(i), t("layer {n}", { n: i + 1 })]);
const headOptions = (H) => [["mean", t("mean of heads")], ...Array.from({ length: H }, (_, i) => [String(i), headLabel(i)])];
const state = { info: null, result: null, gen: null, genToken: 0, nwPending: null, nwBusy: false,
  link: null, picked: null };

// ---------------------------------------------------------------------------- helpers

async function api(path, body) {
  // errors come back in the page's language
  const opts = body === undefined ? { headers: { "Accept-Language": LANG } } : {
    method: "POST", headers: { "Content-Type": "application/json", "Accept-Language": LANG },
    body: JSON.stringify(body),
  };
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (e) { /* not JSON */ }
  if (!res.ok) {
    const msg = data && data.detail ? data.detail : `${res.status} ${res.statusText}`;
    throw new Error(typeof msg === "string" ? msg : JSON.stringify(msg));
  }
  return data;
}

// (L, H, R, C) -> (R, C): one head, or the mean over heads when head === "mean"
function pick(maps, layer, head) {
  const heads = maps[layer];
  if (head !== "mean") return heads[Number(head)];
  return heads[0].map((row, r) => row.map((_, c) =>
    heads.reduce((s, h) => s + h[r][c], 0) / heads.length));
}

// ---------------------------------------------------------------------------- translate tab

function fillSelect(select, options, keep) {
  const old = select.value;
  select.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  if (keep && options.some(([v]) => v === old)) select.value = old;
}

function drawMaps() {
  const res = state.result;
  const box = $("heatmaps");
  hideTip();  // its cell is about to be replaced
  box.replaceChildren();
  if (!res) return;
  const layer = Number($("layer").value || 0);
  const head = $("head").value || "mean";
  const kinds = [
    ["encoder_self", res.source, res.source, t("query"), t("key")],
    ["decoder_self", res.decoder_inputs, res.decoder_inputs, t("query"), t("key")],
    ["cross", res.outputs, res.source, t("target"), t("source")],
  ];
  for (const [key, rows, cols, rowName, colName] of kinds) {
    const maps = res[key];
    if (!maps) continue;
    const single = maps.length === 1 && maps[0].length === 1;
    const l = single ? 0 : Math.min(layer, maps.length - 1);
    const h = single ? 0 : head;
    const title = kindTitle(res, key);
    const figure = heatmap(pick(maps, l, h), rows, cols, {
      kind: key, title: single ? title : `${title} · ${where(l, h)}`, rowName, colName, t,
    });
    if (key === state.picked) figure.classList.add("picked");  // the kind a link named
    box.appendChild(figure);
  }
}

function kindTitle(res, key) {
  return { encoder_self: t("encoder self-attention"), decoder_self: t("decoder self-attention"),
    cross: res.encoder_self ? t("encoder-decoder attention") : t("alignment (Bahdanau)") }[key];
}

// ---------------------------------------------------------------------------- a link to a head

// /?text=…&kind=decoder&layer=2&head=2 opens with the sentence translated and that head
// picked (the coreference topic names its head so: docs/coreference.md). In the link, layer
// and head count from 1, as the pickers show them ("layer 1" is the picker's value "0");
// head may be "mean". kind (encoder, decoder, cross; or encoder_self, decoder_self) outlines
// that kind's map. They apply to the first translation; a value that does not fit the model
// is ignored and the note above the maps says so. Later picks keep the link up to date.
const LINK_KINDS = { encoder: "encoder_self", encoder_self: "encoder_self",
  decoder: "decoder_self", decoder_self: "decoder_self", cross: "cross" };

function readLink() {
  const params = new URLSearchParams(window.location.search);
  const get = (name) => (params.has(name) ? params.get(name).trim() : null);
  const link = { text: params.get("text"), kind: get("kind"), layer: get("layer"), head: get("head") };
  return Object.values(link).some((v) => v !== null) ? link : null;
}

function applyLink(link, res, L, Hn) {
  const ignored = [];
  const ignore = (name, value, why) => ignored.push(t("ignored from the link: {name}={value} ({why})",
    { name, value: value.length > 40 ? `${value.slice(0, 39)}…` : value, why }));
  const whole = (v, n) => /^[0-9]+$/.test(v) && Number(v) >= 1 && Number(v) <= n;
  state.picked = null;
  if (link.kind !== null) {
    const key = LINK_KINDS[link.kind.toLowerCase()];
    if (!key) ignore("kind", link.kind, t("encoder, decoder or cross"));
    else if (!res[key]) ignore("kind", link.kind, t("this model has no {kind}", { kind: kindTitle(res, key) }));
    else state.picked = key;
  }
  if (link.layer !== null) {
    if (whole(link.layer, L)) $("layer").value = String(Number(link.layer) - 1);
    else ignore("layer", link.layer, t("a whole number from 1 to {n}", { n: L }));
  }
  if (link.head !== null) {
    if (link.head.toLowerCase() === "mean") $("head").value = "mean";
    else if (whole(link.head, Hn)) $("head").value = String(Number(link.head) - 1);
    else ignore("head", link.head, t("a whole number from 1 to {n}, or mean", { n: Hn }));
  }
  const shown = $("map-controls").hidden ? null : where(Number($("layer").value || 0), $("head").value || "mean");
  const picked = [state.picked ? kindTitle(res, state.picked) : null, shown].filter(Boolean).join(" · ");
  $("link-picked").textContent = t("opened from the link: {picked}", { picked });
  $("link-ignored").textContent = ignored.join(" · ");
  $("link-note").hidden = false;
}

// the address bar follows the page: a link to what is on screen, to copy or bookmark
function updateLink() {
  const res = state.result;
  if (!res) return;
  const url = new URL(window.location.href);
  url.searchParams.set("text", res.text);
  for (const name of ["kind", "layer", "head"]) url.searchParams.delete(name);
  if (state.picked) url.searchParams.set("kind", state.picked.replace("_self", ""));
  if (!$("map-controls").hidden) {
    url.searchParams.set("layer", String(Number($("layer").value || 0) + 1));
    const head = $("head").value || "mean";
    url.searchParams.set("head", head === "mean" ? "mean" : String(Number(head) + 1));
  }
  window.history.replaceState(null, "", url.toString());
}

function showResult(res) {
  state.result = res;
  $("translation").textContent = res.translation || t("(empty translation)");
  const how = res.beam_size > 1 ? t("beam search, size {k}", { k: res.beam_size }) : t("greedy decoding");
  const extra = [];
  if (!res.finished) extra.push(t("stopped at the length limit"));
  if (res.unknown_words.length) extra.push(t("unknown: {words}", { words: res.unknown_words.map(visible).join(", ") }));
  $("timing").textContent = `${how} · ${(res.seconds * 1000).toFixed(1)} ms` +
    (extra.length ? ` · ${extra.join(" · ")}` : "");
  const ref = res.encoder_self || res.cross;
  const L = ref ? ref.length : 0;
  const Hn = ref ? ref[0].length : 0;
  const multi = Boolean(res.encoder_self) && (L > 1 || Hn > 1);
  $("map-controls").hidden = !multi;
  fillSelect($("layer"), layerOptions(L), true);
  if (!$("layer").value && L) $("layer").value = String(L - 1);
  fillSelect($("head"), headOptions(Hn), true);
  if (state.link) applyLink(state.link, res, L, Hn);
  else $("link-note").hidden = true;  // a later sentence: the link's note is done
  state.link = null;
  $("result").hidden = false;
  drawMaps();
  updateLink();
}

function clearResult() {
  state.result = null;
  $("result").hidden = true;
  $("translation").textContent = "";
  $("timing").textContent = "";
  $("heatmaps").replaceChildren();
  $("tooltip").hidden = true;
  $("link-note").hidden = true;
}

async function onTranslate(ev) {
  ev.preventDefault();
  const button = $("translate-button");
  $("error").hidden = true;
  button.disabled = true;
  document.body.dataset.state = "busy";
  try {
    const res = await api("/api/translate", {
      text: $("text").value,
      beam_size: Number($("beam").value),
      allow_unknown: $("allow-unknown").checked,
      merge_pieces: $("merge-pieces").checked,
    });
    showResult(res);
    document.body.dataset.state = "done";
  } catch (e) {
    clearResult();  // the previous sentence's translation and maps must not stay under the error
    $("error").textContent = e.message;
    $("error").hidden = false;
    document.body.dataset.state = "error";
  } finally {
    button.disabled = false;
  }
}

function updateCount() {
  const max = state.info ? state.info.max_chars : 0;
  const n = $("text").value.length;
  $("char-count").textContent = max ? t("{n} / {max} characters", { n, max }) : "";
}

async function loadInfo() {
  try {
    const info = await api("/api/info");
    state.info = info;
    if (info.task === "language-model") return setUpGenerate(info);
    const cfg = Object.entries(info.model_config).map(([k, v]) => `${k}=${v}`).join(", ");
    const subword = info.tokenizer === "sentencepiece";
    const unit = subword ? t("subword pieces") : t("words");
    $("model-info").textContent = t("{arch} ({config}) · vocabularies {src} EN / {tgt} FR {unit} · at most {max} {unit}",
      { arch: info.arch, config: cfg, src: info.src_vocab_size, tgt: info.tgt_vocab_size, unit, max: info.max_tokens });
    // subword models: no unknown words; the maps can show pieces or whole words
    $("allow-unknown-label").hidden = subword;
    $("merge-pieces-label").hidden = !subword;
    $("text").maxLength = info.max_chars;
    const beams = [["1", t("greedy")]];
    for (let k = 2; k <= info.max_beam; k++) beams.push([String(k), t("beam {k}", { k })]);
    fillSelect($("beam"), beams, true);
    updateCount();
    // a link with a sentence: translate it at once (its kind, layer and head: applyLink)
    state.link = readLink();
    if (state.link && state.link.text) {
      $("text").value = state.link.text;
      updateCount();
      $("translate-form").requestSubmit();
    }
  } catch (e) {
    $("model-info").textContent = t("could not load model information: {error}", { error: e.message });
  }
}

// ---------------------------------------------------------------------------- generate tab

// a language model's token as text: SentencePiece's word boundary "▁" as a space
function tokenText(tok) { return state.info.tokenizer === "sentencepiece" ? tok.replace(/\u2581/g, " ") : tok; }
// ... and as an axis label or a button: spaces made visible
function tokenLabel(tok) { return visible(tokenText(tok)).replace(/ /g, "␣"); }

function setUpGenerate(info) {
  const cfg = Object.entries(info.model_config).map(([k, v]) => `${k}=${v}`).join(", ");
  const unit = { char: t("characters"), word: t("words"), sentencepiece: t("subword pieces"),
    "gpt2-bpe": t("byte-level BPE pieces") }[info.tokenizer];
  const context = info.context_length ? t(" · context {n} tokens", { n: info.context_length }) : "";
  $("model-info").textContent = t("language model {arch} ({config}) · {n} {unit}{context}",
    { arch: info.arch, config: cfg, n: info.vocab_size, unit, context });
  $("tab-translate").hidden = true;
  $("tab-generate").hidden = false;
  $("prompt").maxLength = info.max_chars;
  $("new-tokens").max = info.max_new_tokens;
  selectTab("generate");
}

function numberOrNull(id) { return $(id).value === "" ? null : Number($(id).value); }

function drawGen() {
  const res = state.gen;
  hideTip();
  $("gen-heatmaps").replaceChildren();
  $("gen-context").replaceChildren();
  if (!res || !res.attention) return;
  const matrix = pick(res.attention, Number($("gen-layer").value || 0), $("gen-head").value || "mean");  // (N, K)
  const context = [...res.prompt_tokens, ...res.new_tokens.slice(0, -1)];  // K
  const j = Math.min(state.genToken, matrix.length - 1);
  const chooser = res.prompt_tokens.length - 1 + j;  // the position whose output is token j
  [...$("gen-tokens").children].forEach((b, i) => b.setAttribute("aria-selected", String(i === j)));
  // token j's attention as shading over the context it could see
  const row = matrix[j];
  const vmax = Math.max(...row) || 1;
  const sep = state.info.tokenizer === "word" ? " " : "";
  context.slice(0, chooser + 1).forEach((tok, k) => {
    const span = document.createElement("span");
    span.textContent = tokenText(tok);
    span.style.background = color(row[k] / vmax);
    span.dataset.weight = row[k].toFixed(4);
    if (k === chooser) span.className = "chooser";
    span.addEventListener("mousemove", (ev) => showTip(ev, `“${tokenLabel(tok)}”: ${row[k].toFixed(3)}`));
    span.addEventListener("mouseleave", hideTip);
    $("gen-context").append(span, sep);
  });
  // every new token's row: new tokens (rows) over the context (columns)
  const cell = Math.max(6, Math.min(22, Math.floor(1100 / Math.max(context.length, 1))));
  const shown = where(Number($("gen-layer").value), $("gen-head").value);
  $("gen-heatmaps").appendChild(heatmap(matrix, res.new_tokens.map(tokenLabel), context.map(tokenLabel), {
    kind: "lm", title: t("attention of each new token over its context · {where}", { where: shown }),
    rowName: t("new token"), colName: t("context token"), cell, every: cell < 10 ? Math.ceil(10 / cell) : 1, t,
  }));
}

function showGen(res, req) {
  state.gen = res;
  state.genToken = 0;
  $("gen-prompt").textContent = res.prompt;
  $("gen-continuation").textContent = res.continuation;
  const how = req.temperature > 0
    ? t("sampled at temperature {t}", { t: req.temperature }) +
      (req.top_k ? t(", top-k {k}", { k: req.top_k }) : "") +
      (req.top_p ? t(", top-p {p}", { p: req.top_p }) : "") +
      (req.seed !== null ? t(", seed {seed}", { seed: req.seed }) : "")
    : t("greedy");
  const none = res.attention ? "" : t(" · a recurrent model: no attention to show");
  $("gen-timing").textContent = t("{n} new tokens · {how} · {ms} ms{none}",
    { n: res.new_tokens.length, how, ms: (res.seconds * 1000).toFixed(1), none });
  $("gen-attention").hidden = !res.attention;
  if (res.attention) {
    const L = res.attention.length, Hn = res.attention[0].length;
    fillSelect($("gen-layer"), layerOptions(L), true);
    if (!$("gen-layer").value) $("gen-layer").value = String(L - 1);
    fillSelect($("gen-head"), headOptions(Hn), true);
    $("gen-tokens").replaceChildren(...res.new_tokens.map((tok, i) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = tokenLabel(tok);
      b.setAttribute("role", "option");
      b.addEventListener("click", () => { state.genToken = i; drawGen(); });
      return b;
    }));
  }
  $("gen-result").hidden = false;
  drawGen();
}

function clearGen() {
  state.gen = null;
  $("gen-result").hidden = true;
  for (const id of ["gen-prompt", "gen-continuation", "gen-timing"]) $(id).textContent = "";
  for (const id of ["gen-tokens", "gen-context", "gen-heatmaps"]) $(id).replaceChildren();
  hideTip();
}

async function onGenerate(ev) {
  ev.preventDefault();
  const button = $("generate-button");
  $("gen-error").hidden = true;
  button.disabled = true;
  document.body.dataset.state = "busy";
  const req = {
    prompt: $("prompt").value,
    max_new_tokens: numberOrNull("new-tokens"),
    temperature: numberOrNull("temperature") ?? 0,
    top_k: numberOrNull("top-k"),
    top_p: numberOrNull("top-p"),
    seed: numberOrNull("seed"),
  };
  try {
    showGen(await api("/api/generate", req), req);
    document.body.dataset.state = "done";
  } catch (e) {
    clearGen();  // the previous prompt's continuation must not stay under the error
    $("gen-error").textContent = e.message;
    $("gen-error").hidden = false;
    document.body.dataset.state = "error";
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------- Nadaraya-Watson tab

function linePlot(d) {
  const W = 440, H = 300, m = { l: 36, r: 10, t: 10, b: 28 };
  const ys = [...d.y_train, ...d.y_truth, ...d.y_hat];
  const y0 = Math.floor(Math.min(...ys)), y1 = Math.ceil(Math.max(...ys));
  const sx = (x) => m.l + (x / 5) * (W - m.l - m.r);
  const sy = (y) => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "nw-plot" });
  svg.appendChild(el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none", stroke: "#ccc" }));
  for (let x = 0; x <= 5; x++) svg.appendChild(el("text", { x: sx(x), y: H - 10, "text-anchor": "middle" }, String(x)));
  for (let y = y0; y <= y1; y++) svg.appendChild(el("text", { x: m.l - 6, y: sy(y) + 4, "text-anchor": "end" }, String(y)));
  const path = (xs, ys2) => xs.map((x, i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(ys2[i]).toFixed(1)}`).join("");
  svg.appendChild(el("path", { d: path(d.x_test, d.y_truth), fill: "none", stroke: "#4a6fa5", "stroke-width": 2, "stroke-dasharray": "5 4" }));
  svg.appendChild(el("path", { d: path(d.x_test, d.y_hat), fill: "none", stroke: "#b3361e", "stroke-width": 2.5, class: "fit" }));
  d.x_train.forEach((x, i) => svg.appendChild(el("circle", { cx: sx(x), cy: sy(d.y_train[i]), r: 3, fill: "#888", opacity: 0.7 })));
  const legend = [[t("truth"), "#4a6fa5"], [t("prediction"), "#b3361e"], [t("training data"), "#888"]];
  legend.forEach(([name, c], i) => {
    svg.appendChild(el("rect", { x: m.l + 10, y: m.t + 8 + i * 16, width: 12, height: 4, fill: c }));
    svg.appendChild(el("text", { x: m.l + 28, y: m.t + 13 + i * 16 }, name));
  });
  return svg;
}

function drawNW(d) {
  $("nw-plot").replaceChildren(linePlot(d));
  const vmax = Math.max(...d.attention.map((r) => Math.max(...r)));
  const fmt = (x) => x.toFixed(1);
  $("nw-matrix").replaceChildren(heatmap(d.attention, d.x_test.map(fmt), d.x_train.map(fmt), {
    kind: "nw", title: t("max weight {w}", { w: vmax.toFixed(3) }), rowName: t("test x"),
    colName: t("training x"), vmax, cell: 6, every: 10, t,
  }).lastChild);
}

function widthValue() { return Math.pow(10, Number($("width").value)); }

// at most one request in flight; the latest slider position wins
async function updateNW() {
  const width = widthValue();
  $("width-value").textContent = `${width.toFixed(3)} (w = ${(1 / width).toFixed(2)})`;
  state.nwPending = width;
  if (state.nwBusy) return;
  state.nwBusy = true;
  try {
    while (state.nwPending !== null) {
      const w = state.nwPending;
      state.nwPending = null;
      drawNW(await api("/api/nadaraya-watson", { width: Number(w.toFixed(4)) }));
    }
  } catch (e) {
    $("nw-plot").textContent = t("could not compute: {error}", { error: e.message });
  } finally {
    state.nwBusy = false;
  }
}

// ---------------------------------------------------------------------------- tabs and start-up

function selectTab(name) {
  for (const tab of ["translate", "generate", "nw"]) {
    const on = tab === name;
    $(`tab-${tab}`).setAttribute("aria-selected", String(on));
    $(`panel-${tab}`).hidden = !on;
  }
  if (name === "nw" && !$("nw-plot").firstChild) updateNW();
}

// the language switch: the page again, in the language picked (the server renders it)
function switchLanguage() {
  const url = new URL(window.location.href);
  url.searchParams.set("lang", $("lang").value);
  window.location.assign(url.toString());
}

document.addEventListener("DOMContentLoaded", () => {
  V.tipElement = $("tooltip");  // the page's own tooltip, styled by style.css
  $("lang").value = LANG;
  $("lang").addEventListener("change", switchLanguage);
  $("translate-form").addEventListener("submit", onTranslate);
  $("text").addEventListener("input", updateCount);
  for (const id of ["layer", "head"]) $(id).addEventListener("change", () => { drawMaps(); updateLink(); });
  // pieces <-> words: ask again for the sentence on screen
  $("merge-pieces").addEventListener("change", () => {
    if (!$("result").hidden) $("translate-form").requestSubmit();
  });
  $("width").addEventListener("input", updateNW);
  $("tab-translate").addEventListener("click", () => selectTab("translate"));
  $("tab-nw").addEventListener("click", () => selectTab("nw"));
  $("tab-generate").addEventListener("click", () => selectTab("generate"));
  $("generate-form").addEventListener("submit", onGenerate);
  $("gen-layer").addEventListener("change", drawGen);
  $("gen-head").addEventListener("change", drawGen);
  loadInfo();
});
