// attnkit attention drawing, part 2: the embedded maps decoded, and the three views of one
// panel (one kind of attention, (L, H, Q, K)): head view, model view, matrix view.
(function (ns) {
  "use strict";
  const LINES = 20000;  // the head view draws every row's lines up to this many, else one row

  function base64Bytes(text) {
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function inflate(bytes, tr) {  // zlib (RFC 1950) -> bytes, with the browser's own inflater
    if (typeof DecompressionStream === "undefined") {
      throw new Error(tr("this browser has no DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+)"));
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  /** One kind of attention: weight (l, h, q, k) = bytes[((l H + h) Q + q) K + k] / 255 * scales[l H + h]. */
  class Panel {
    constructor(spec, bytes, tr) {
      Object.assign(this, { spec, bytes, scales: spec.scales });
      this.L = spec.layers; this.H = spec.heads;
      this.Q = spec.queries.length; this.K = spec.keys.length;
      if (bytes.length !== this.L * this.H * this.Q * this.K) {
        throw new Error(tr("{title}: {n} weights embedded, expected {L} x {H} x {Q} x {K}",
          { title: spec.title, n: bytes.length, L: this.L, H: this.H, Q: this.Q, K: this.K }));
      }
    }
    // row q of head h (a number), or its mean over heads ("mean", "all"): Float32Array (K)
    row(l, h, q) {
      const out = new Float32Array(this.K);
      const heads = typeof h === "number" ? [h] : [...Array(this.H).keys()];
      for (const hh of heads) {
        const i = l * this.H + hh, f = this.scales[i] / 255 / heads.length;
        const base = (i * this.Q + q) * this.K;
        for (let k = 0; k < this.K; k++) out[k] += this.bytes[base + k] * f;
      }
      return out;
    }
    // the whole map of head h or the mean of heads: Float32Array (Q * K)
    map(l, h) {
      const out = new Float32Array(this.Q * this.K);
      for (let q = 0; q < this.Q; q++) out.set(this.row(l, h, q), q * this.K);
      return out;
    }
  }
  // tr: the view's words (ns.translator); English without one
  ns.decodePanel = async (spec, tr = ns.translator(null)) =>
    new Panel(spec, await inflate(base64Bytes(spec.data), tr), tr);

  const headName = (h, tr) => (typeof h === "number" ? tr("head {n}", { n: h + 1 }) :
    h === "all" ? tr("all heads") : tr("mean of heads"));
  ns.headName = headName;

  // ------------------------------------------------------------------ head view

  /** Queries on the left, keys on the right, a line per (query, key) weighted by attention. */
  ns.headView = function headView(p, st, note) {
    const { queries, keys, qname, kname } = p.spec;
    const tr = st.tr || ns.translator(null);
    const rowH = 16, gap = 170;
    const qw = Math.ceil(ns.textWidth(queries, 1, 12)) + 14, kw = Math.ceil(ns.textWidth(keys, 1, 12)) + 70;
    const W = qw + gap + kw, H = Math.max(p.Q, p.K) * rowH + 8;
    const x0 = qw, x1 = qw + gap;
    const svg = ns.el("svg", {
      class: "head-view", width: W, height: H, viewBox: `0 0 ${W} ${H}`, xmlns: ns.SVG_NS,
      "font-family": "system-ui, sans-serif", "font-size": 12, "data-layer": st.layer,
      "data-head": st.head,
    });
    const y = (i) => 4 + (i + 0.5) * rowH;
    const shades = ns.el("g", { class: "shades" }), lines = ns.el("g", { class: "lines" });
    svg.append(shades, lines);
    // long tokens cut with "…", the full token on hover (ns.label)
    const qText = queries.map((tok, i) => svg.appendChild(ns.label({
      class: "q-token", x: x0 - 8, y: y(i), "text-anchor": "end", "dominant-baseline": "middle",
      "data-index": i, fill: "#1d2330",
    }, tok)));
    const kText = keys.map((tok, i) => svg.appendChild(ns.label({
      class: "k-token", x: x1 + 8, y: y(i), "dominant-baseline": "middle", "data-index": i,
      fill: "#1d2330",
    }, tok)));
    const heads = st.head === "all" ? [...Array(p.H).keys()] : [st.head];
    let pinned = null;

    function draw(focus) {
      lines.replaceChildren();
      shades.replaceChildren();
      qText.forEach((t, i) => t.setAttribute("class", i === focus ? "q-token focus" : "q-token"));
      const rows = focus !== null ? [focus] :
        p.Q * p.K * heads.length <= LINES ? [...Array(p.Q).keys()] : [];
      const floor = focus !== null ? 0.002 : 0.01;
      for (const h of heads) {
        const stroke = st.head === "all" ? ns.headColor(h, p.H) : "#b3361e";
        for (const q of rows) {
          const row = p.row(st.layer, h, q);
          for (let k = 0; k < p.K; k++) {
            if (row[k] < floor) continue;
            lines.appendChild(ns.el("line", {
              x1: x0, y1: y(q), x2: x1, y2: y(k), stroke, "stroke-opacity": Math.min(1, row[k]).toFixed(3),
              "stroke-width": focus !== null ? 2 : 1.2,
            }));
          }
        }
      }
      kText.forEach((t) => { t.removeAttribute("data-weight"); ns.setLabel(t, ns.short(keys[t.dataset.index])); });
      if (focus !== null) {  // the focused row, as numbers beside the keys and shading behind them
        const row = p.row(st.layer, st.head === "all" ? "mean" : st.head, focus);
        const top = Math.max(...row) || 1;
        kText.forEach((t, k) => {
          t.dataset.weight = row[k].toFixed(6);
          ns.setLabel(t, `${ns.short(keys[k])}  ${row[k].toFixed(3)}`);
          // a translucent shade: the text stays readable on a light or a dark theme
          shades.appendChild(ns.el("rect", {
            x: x1 + 4, y: y(k) - rowH / 2 + 1, width: kw - 8, height: rowH - 2, fill: ns.color(0.6),
            "fill-opacity": ((0.8 * row[k]) / top).toFixed(3),
          }));
        });
        shades.appendChild(ns.el("rect", {
          x: 2, y: y(focus) - rowH / 2 + 1, width: x0 - 6, height: rowH - 2, fill: ns.color(0.5),
          "fill-opacity": 0.3,
        }));
      }
      note(focus !== null
        ? tr("{qname} “{token}”: its attention over the {kname} tokens", { qname, token: queries[focus], kname }) +
          (st.head === "all" ? tr(" (numbers: mean of heads; lines: one colour per head)") : "") +
          (pinned !== null ? tr(" · click it again to unpin") : tr(" · click to pin"))
        : rows.length ? tr("hover or click a {qname} token to see its row", { qname }) +
          (st.head === "all" ? tr("; one colour per head") : "") + tr("; lines under 0.01 not drawn")
        : tr("{Q} x {K} x {n} lines are too many to draw at once: hover or click a {qname} token to see its row",
          { Q: p.Q, K: p.K, n: heads.length, qname }));
    }
    qText.forEach((t, i) => {
      t.addEventListener("mouseenter", () => { if (pinned === null) draw(i); });
      t.addEventListener("mouseleave", () => { if (pinned === null) draw(null); });
      t.addEventListener("click", () => { pinned = pinned === i ? null : i; draw(pinned ?? i); });
    });
    if (st.head === "all") {  // a legend of head colours
      const legend = document.createElement("div");
      legend.className = "legend";
      for (const h of heads) {
        const s = document.createElement("span");
        s.textContent = tr("head {n}", { n: h + 1 });
        s.style.color = ns.headColor(h, p.H);
        legend.appendChild(s);
      }
      const box = document.createElement("div");
      box.append(legend, svg);
      draw(null);
      return box;
    }
    draw(null);
    return svg;
  };

  // ------------------------------------------------------------------ model view

  /** Every layer x head as a thumbnail (block means, at most `thumb` cells a side); click one
   * to enlarge it in the matrix view. */
  ns.modelView = function modelView(p, st, note, onPick) {
    const tr = st.tr || ns.translator(null);
    const f = Math.max(1, Math.ceil(Math.max(p.Q, p.K) / st.thumb));
    const tq = Math.ceil(p.Q / f), tk = Math.ceil(p.K / f);
    const grid = document.createElement("div");
    grid.className = "model-view";
    grid.style.gridTemplateColumns = `auto repeat(${p.H}, auto)`;
    grid.appendChild(document.createElement("span"));
    for (let h = 0; h < p.H; h++) grid.appendChild(Object.assign(document.createElement("span"), { textContent: tr("head {n}", { n: h + 1 }) }));
    const sums = new Float32Array(tq * tk), counts = new Float32Array(tq * tk);
    for (let q = 0; q < p.Q; q++) for (let k = 0; k < p.K; k++) counts[Math.floor(q / f) * tk + Math.floor(k / f)] += 1;
    for (let l = 0; l < p.L; l++) {
      grid.appendChild(Object.assign(document.createElement("span"), { textContent: tr("layer {n}", { n: l + 1 }) }));
      for (let h = 0; h < p.H; h++) {
        const i = l * p.H + h, s = p.scales[i] / 255, base = i * p.Q * p.K;
        sums.fill(0);
        for (let q = 0; q < p.Q; q++) {
          const r = Math.floor(q / f) * tk, o = base + q * p.K;
          for (let k = 0; k < p.K; k++) sums[r + Math.floor(k / f)] += p.bytes[o + k];
        }
        let top = 0;
        for (let j = 0; j < sums.length; j++) { sums[j] = (sums[j] * s) / counts[j]; top = Math.max(top, sums[j]); }
        const canvas = document.createElement("canvas");
        Object.assign(canvas, { width: tk, height: tq, className: "thumb", title: tr("layer {layer}, head {head}: click to enlarge", { layer: l + 1, head: h + 1 }) });
        Object.assign(canvas.dataset, { layer: l, head: h });
        const size = Math.min(96, Math.max(48, 3 * Math.max(tq, tk)));
        canvas.style.width = `${Math.round((size * tk) / Math.max(tq, tk))}px`;
        canvas.style.height = `${Math.round((size * tq) / Math.max(tq, tk))}px`;
        const ctx = canvas.getContext("2d"), img = ctx.createImageData(tk, tq);
        for (let j = 0; j < sums.length; j++) {
          const c = ns.rgb(sums[j] / (top || 1));
          img.data.set([c[0], c[1], c[2], 255], j * 4);
        }
        ctx.putImageData(img, 0, 0);
        canvas.addEventListener("click", () => onPick(l, h));
        grid.appendChild(canvas);
      }
    }
    note(tr("{L} layers x {H} heads, each map coloured from 0 to its own largest weight", { L: p.L, H: p.H }) +
      (f > 1 ? tr("; thumbnails downsampled from {Q} x {K} to {q} x {k} (means of {f} x {f} blocks)",
        { Q: p.Q, K: p.K, q: tq, k: tk, f }) : "") +
      tr("; click a map to enlarge it"));
    return grid;
  };

  // ------------------------------------------------------------------ matrix view

  /** The explorer's heatmap, tokens on the axes: SVG cells up to 64 x 64, a canvas beyond. */
  ns.matrixView = function matrixView(p, st, note) {
    const tr = st.tr || ns.translator(null);
    const head = st.head === "all" ? "mean" : st.head;
    const values = p.map(st.layer, head);
    let vmax = 0;
    for (const v of values) vmax = Math.max(vmax, v);
    const { queries, keys, qname, kname } = p.spec;
    const where = tr("layer {layer}, {head}", { layer: st.layer + 1, head: headName(head, tr) });
    const title = `${p.spec.title} · ${where}`;
    const opts = { kind: p.spec.key, title, rowName: qname, colName: kname, vmax: vmax || 1, t: tr };
    note(tr("colour scale from 0 to {vmax}, the largest weight of this map; hover a cell for its weight",
      { vmax: vmax.toFixed(3) }));
    if (p.Q * p.K <= 4096) {
      const rows = Array.from({ length: p.Q }, (_, q) => Array.from(values.subarray(q * p.K, (q + 1) * p.K)));
      return ns.heatmap(rows, queries, keys, { ...opts, cell: Math.max(12, Math.min(26, Math.floor(900 / p.K))) });
    }
    return ns.canvasHeatmap(values, queries, keys, opts);
  };
})(window.attnkitViews = window.attnkitViews || {});
