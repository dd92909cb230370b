// attnkit attention drawing, part 1: colours, the tooltip and heatmaps (SVG cells for small
// maps, a canvas for large ones). Shared by the explorer page (serve/static/index.html loads
// it) and the notebook views (attnkit.views embeds it in each output). Plain JS, no network.
(function (ns) {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  ns.SVG_NS = SVG_NS;

  ns.el = function el(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };

  // the words of a view or a page in its reader's language: t(English, {field: value})
  // looks the English up in `table` ({English: translation}, from attnkit's catalog, embedded
  // by the server or the view) and fills its {fields}; what the table lacks stays English
  ns.translator = function translator(table) {
    return (text, fields) => {
      const s = (table && Object.prototype.hasOwnProperty.call(table, text) && table[text]) || text;
      return fields ? s.replace(/\{(\w+)\}/g, (m, k) => (k in fields ? String(fields[k]) : m)) : s;
    };
  };
  const english = ns.translator(null);

  // white -> orange -> dark red, t in [0, 1] (matplotlib's "Reds" in three stops)
  const STOPS = [[255, 255, 255], [252, 141, 89], [127, 0, 0]];
  function rgb(t) {
    t = Math.min(1, Math.max(0, t || 0)) * (STOPS.length - 1);
    const i = Math.min(Math.floor(t), STOPS.length - 2);
    const f = t - i;
    return STOPS[i].map((a, k) => Math.round(a + f * (STOPS[i + 1][k] - a)));
  }
  ns.rgb = rgb;
  ns.color = (t) => { const c = rgb(t); return `rgb(${c[0]},${c[1]},${c[2]})`; };
  // one colour per head, evenly spaced hues
  ns.headColor = (h, H) => `hsl(${Math.round((h * 360) / Math.max(H, 1))}, 70%, 42%)`;

  // a token as a label draws it: at most LABEL_CHARS characters, a longer one cut to its first
  // LABEL_CHARS - 1 and "…" (attnkit.views.text.short, the same rule)
  ns.LABEL_CHARS = 20;
  ns.short = (word) => {
    const chars = Array.from(word);
    return chars.length > ns.LABEL_CHARS ? `${chars.slice(0, ns.LABEL_CHARS - 1).join("")}…` : word;
  };
  // an SVG <text> showing `word` cut by ns.short: the full word in its <title> (the hover
  // tooltip) and data-token; setLabel(node, text) changes what it shows and keeps the title
  ns.label = function label(attrs, word) {
    const node = ns.el("text", { ...attrs, "data-token": word }, ns.short(word));
    if (ns.short(word) !== word) node.appendChild(ns.el("title", {}, word));
    return node;
  };
  ns.setLabel = (node, text) => { node.firstChild.data = text; };

  // the page's colours: the first of the CSS variables `names` the page defines (JupyterLab's
  // --jp-*, VS Code's --vscode-*: light or dark), else `fallback`
  ns.themeColor = function themeColor(names, fallback) {
    const style = document.body ? getComputedStyle(document.body) : null;
    for (const name of names) {
      const v = style ? style.getPropertyValue(name).trim() : "";
      if (v) return v;
    }
    return fallback;
  };

  // invisible, control and format characters (a zero-width space ...) as \u escapes
  ns.visible = (word) =>
    word.replace(/\p{C}/gu, (c) => `\\u${c.codePointAt(0).toString(16).padStart(4, "0")}`);

  // the tooltip: the page's own (ns.tipElement, the explorer's #tooltip) or one made here
  function tipNode() {
    if (ns.tipElement) return ns.tipElement;
    let tip = document.getElementById("attnkit-tooltip");
    if (!tip) {
      tip = document.createElement("div");
      tip.id = "attnkit-tooltip";
      tip.style.cssText = "position:fixed;pointer-events:none;background:#1d2330;color:#fff;" +
        "padding:0.3rem 0.5rem;border-radius:4px;font:13px system-ui,sans-serif;" +
        "white-space:nowrap;z-index:10000";
      tip.hidden = true;
      document.body.appendChild(tip);
    }
    return tip;
  }
  ns.showTip = function showTip(ev, text) {
    const tip = tipNode();
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = `${ev.clientX + 12}px`;
    tip.style.top = `${ev.clientY + 12}px`;
  };
  ns.hideTip = () => { tipNode().hidden = true; };

  let measureCtx = null;
  // the widest of `labels` (every `every`-th, cut by ns.short) drawn at `size` px
  ns.textWidth = function textWidth(labels, every = 1, size = 11) {
    measureCtx = measureCtx || document.createElement("canvas").getContext("2d");
    measureCtx.font = `${size}px system-ui, sans-serif`;
    return Math.max(0, ...labels.map((s, i) => (i % every ? 0 : measureCtx.measureText(ns.short(s)).width)));
  };

  function figure(title, node) {
    const fig = document.createElement("figure");
    const cap = document.createElement("figcaption");
    cap.textContent = title;
    fig.append(cap, node);
    return fig;
  }

  // a cell's tooltip: both tokens and the weight
  function tip(opts, query, key, w) {
    const tr = opts.t || english;
    return tr("{qname} “{query}” → {kname} “{key}”: {weight}",
      { qname: opts.rowName, query, kname: opts.colName, key, weight: w.toFixed(3) });
  }

  /**
   * An SVG heatmap in a <figure>: one row per rowLabels entry, one column per colLabels entry;
   * matrix[r][c] is the weight. opts: kind (data-kind), title, rowName/colName (tooltip words),
   * vmax (colour scale top, default 1), cell (px), every (label step), t (ns.translator: the
   * tooltip's words).
   */
  ns.heatmap = function heatmap(matrix, rowLabels, colLabels, opts) {
    const cell = opts.cell || 26;
    const every = opts.every || 1;
    const vmax = opts.vmax || 1;
    const left = ns.textWidth(rowLabels, every) + 10;
    const top = ns.textWidth(colLabels, every) + 10;
    const W = left + cell * colLabels.length + 2;
    const H = top + cell * rowLabels.length + 2;
    const svg = ns.el("svg", {
      class: "heatmap", width: W, height: H, viewBox: `0 0 ${W} ${H}`, xmlns: SVG_NS,
      "data-kind": opts.kind, "data-rows": rowLabels.length, "data-cols": colLabels.length,
      role: "img", "aria-label": opts.title, "font-family": "system-ui, sans-serif", "font-size": 11,
    });
    rowLabels.forEach((tok, r) => {
      if (r % every) return;
      svg.appendChild(ns.label({
        class: "row-label", x: left - 5, y: top + (r + 0.5) * cell, "text-anchor": "end",
        "dominant-baseline": "middle",
      }, tok));
    });
    colLabels.forEach((tok, c) => {
      if (c % every) return;
      const x = left + (c + 0.5) * cell;
      svg.appendChild(ns.label({
        class: "col-label", x, y: top - 5, transform: `rotate(-90 ${x} ${top - 5})`,
        "dominant-baseline": "middle",
      }, tok));
    });
    const cells = ns.el("g", { class: "cells" });
    matrix.forEach((row, r) => row.forEach((w, c) => {
      const rect = ns.el("rect", {
        class: "cell", x: left + c * cell, y: top + r * cell, width: cell, height: cell,
        fill: ns.color(w / vmax), "data-row": r, "data-col": c, "data-weight": w.toFixed(4),
      });
      const text = tip(opts, rowLabels[r], colLabels[c], w);
      rect.addEventListener("mousemove", (ev) => ns.showTip(ev, text));
      rect.addEventListener("mouseleave", ns.hideTip);
      cells.appendChild(rect);
    }));
    svg.appendChild(cells);
    svg.appendChild(ns.el("rect", {
      x: left, y: top, width: cell * colLabels.length, height: cell * rowLabels.length,
      fill: "none", stroke: "#bbb",
    }));
    return figure(opts.title, svg);
  };

  /**
   * A canvas heatmap for maps too large for one SVG element per cell: values is a
   * Float32Array (rows * cols, row-major). Labels every `every`-th token; hovering reads
   * the cell under the pointer. Same opts as heatmap().
   */
  ns.canvasHeatmap = function canvasHeatmap(values, rowLabels, colLabels, opts) {
    const R = rowLabels.length, C = colLabels.length;
    const cell = opts.cell || Math.max(1, Math.floor(900 / Math.max(R, C)));
    const every = opts.every || Math.max(1, Math.ceil(12 / cell));
    const vmax = opts.vmax || 1;
    const left = Math.ceil(ns.textWidth(rowLabels, every)) + 10;
    const top = Math.ceil(ns.textWidth(colLabels, every)) + 10;
    const canvas = document.createElement("canvas");
    canvas.width = left + C * cell + 2;
    canvas.height = top + R * cell + 2;
    canvas.className = "heatmap-canvas";
    Object.assign(canvas.dataset, { kind: opts.kind, rows: R, cols: C });
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = ns.themeColor(["--jp-layout-color0", "--vscode-editor-background"], "#fff");
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    const img = ctx.createImageData(C * cell, R * cell);
    for (let r = 0; r < R; r++) {
      for (let c = 0; c < C; c++) {
        const [cr, cg, cb] = rgb(values[r * C + c] / vmax);
        for (let dy = 0; dy < cell; dy++) {
          let o = ((r * cell + dy) * C * cell + c * cell) * 4;
          for (let dx = 0; dx < cell; dx++, o += 4) {
            img.data[o] = cr; img.data[o + 1] = cg; img.data[o + 2] = cb; img.data[o + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(img, left, top);
    ctx.strokeStyle = "#bbb";
    ctx.strokeRect(left - 0.5, top - 0.5, C * cell + 1, R * cell + 1);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = ns.themeColor(["--jp-ui-font-color1", "--vscode-foreground"], "#1d2330");
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (let r = 0; r < R; r += every) ctx.fillText(ns.short(rowLabels[r]), left - 5, top + (r + 0.5) * cell);
    for (let c = 0; c < C; c += every) {
      ctx.save();
      ctx.translate(left + (c + 0.5) * cell, top - 5);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      ctx.fillText(ns.short(colLabels[c]), 0, 0);
      ctx.restore();
    }
    canvas.addEventListener("mousemove", (ev) => {
      const box = canvas.getBoundingClientRect();
      const c = Math.floor((ev.clientX - box.left - left) / cell);
      const r = Math.floor((ev.clientY - box.top - top) / cell);
      if (r < 0 || c < 0 || r >= R || c >= C) return ns.hideTip();
      const w = values[r * C + c];
      ns.showTip(ev, tip(opts, rowLabels[r], colLabels[c], w));
    });
    canvas.addEventListener("mouseleave", ns.hideTip);
    return figure(opts.title, canvas);
  };
})(window.attnkitViews = window.attnkitViews || {});
