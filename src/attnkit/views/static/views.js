// attnkit attention drawing, part 3: a notebook view mounted from its embedded data (a
// <script type="application/json" class="attnkit-data"> inside a .attnkit-view element): the
// pickers, the three views and the download buttons. Nothing is fetched from anywhere.
(function (ns) {
  "use strict";
  const VIEWS = ["head", "model", "matrix"];

  function option(select, value, label) { select.appendChild(new Option(label, String(value))); }

  function select(cls, label, options, value, onChange) {
    const wrap = document.createElement("label");
    wrap.textContent = `${label} `;
    const s = document.createElement("select");
    s.className = cls;
    options.forEach(([v, text]) => option(s, v, text));
    s.value = String(value);
    s.addEventListener("change", () => onChange(s.value));
    wrap.appendChild(s);
    return wrap;
  }

  function download(name, blob) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  /** What `body` shows, as one SVG document: its SVG elements nested, its canvases as PNG
   * images and its captions as text, each where it sits on the page. */
  ns.snapshotSVG = function snapshotSVG(body) {
    const box = body.getBoundingClientRect();
    const W = Math.ceil(body.scrollWidth), H = Math.ceil(body.scrollHeight);
    const out = ns.el("svg", { xmlns: ns.SVG_NS, width: W, height: H, viewBox: `0 0 ${W} ${H}`,
      "font-family": "system-ui, sans-serif", "font-size": 11 });
    out.appendChild(ns.el("rect", { width: W, height: H, fill: "#fff" }));
    const at = (node) => {
      const r = node.getBoundingClientRect();
      return [r.left - box.left + body.scrollLeft, r.top - box.top + body.scrollTop, r.width, r.height];
    };
    body.querySelectorAll("svg, canvas, figcaption, .model-view > span, .legend > span").forEach((node) => {
      const [x, y, w, h] = at(node);
      if (node.tagName.toLowerCase() === "canvas") {
        out.appendChild(ns.el("image", { x, y, width: w, height: h, href: node.toDataURL("image/png"),
          style: "image-rendering: pixelated" }));
      } else if (node instanceof SVGSVGElement) {
        if (node.ownerSVGElement) return;
        const copy = node.cloneNode(true);
        copy.setAttribute("x", x);
        copy.setAttribute("y", y);
        out.appendChild(copy);
      } else {
        out.appendChild(ns.el("text", { x, y: y + h * 0.75, fill: node.style.color || "#1d2330",
          "font-weight": node.tagName === "FIGCAPTION" ? 600 : 400 }, node.textContent));
      }
    });
    return new XMLSerializer().serializeToString(out);
  };

  async function svgToPng(svgText, W, H) {
    const url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
    try {
      const img = new Image();
      img.src = url;
      await img.decode();
      const canvas = document.createElement("canvas");
      canvas.width = W * 2; canvas.height = H * 2;
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(img, 0, 0);
      return await new Promise((ok) => canvas.toBlob(ok, "image/png"));
    } finally {
      URL.revokeObjectURL(url);
    }
  }

  function render(root, spec, panels, st) {
    const p = panels[st.panel];
    const tr = st.tr;
    st.layer = Math.min(st.layer, p.L - 1);
    if (typeof st.head === "number" && st.head >= p.H) st.head = "mean";
    const bar = root.querySelector(".attnkit-bar"), body = root.querySelector(".attnkit-body");
    const noteNode = root.querySelector(".attnkit-note");
    const note = (text) => { noteNode.textContent = text; };
    const redraw = () => render(root, spec, panels, st);
    bar.replaceChildren();
    if (panels.length > 1) {
      bar.appendChild(select("attnkit-panel", tr("attention"), panels.map((q, i) => [i, q.spec.title]), st.panel,
        (v) => { st.panel = Number(v); redraw(); }));
    } else {
      bar.appendChild(Object.assign(document.createElement("span"), { className: "attnkit-kind", textContent: p.spec.title }));
    }
    const views = document.createElement("span");
    views.className = "attnkit-views";
    const labels = { head: tr("head view"), model: tr("model view"), matrix: tr("matrix view") };
    for (const v of VIEWS) {
      const b = document.createElement("button");
      Object.assign(b, { type: "button", textContent: labels[v] });
      b.dataset.view = v;
      b.setAttribute("aria-pressed", String(v === st.view));
      b.addEventListener("click", () => { st.view = v; redraw(); });
      views.appendChild(b);
    }
    bar.appendChild(views);
    if (st.view !== "model") {
      if (p.L > 1) {
        bar.appendChild(select("attnkit-layer", tr("layer"), [...Array(p.L).keys()].map((l) => [l, tr("layer {n}", { n: l + 1 })]),
          st.layer, (v) => { st.layer = Number(v); redraw(); }));
      }
      const heads = [["mean", tr("mean of heads")], ...[...Array(p.H).keys()].map((h) => [h, tr("head {n}", { n: h + 1 })])];
      if (st.view === "head" && p.H > 1) heads.unshift(["all", tr("all heads (colours)")]);
      if (st.view !== "head" && st.head === "all") st.head = "mean";
      if (p.H > 1) {
        bar.appendChild(select("attnkit-head", "", heads, st.head,
          (v) => { st.head = v === "mean" || v === "all" ? v : Number(v); redraw(); }));
      }
    }
    for (const fmt of ["svg", "png"]) {
      const b = document.createElement("button");
      Object.assign(b, { type: "button", textContent: `⤓ ${fmt.toUpperCase()}`, className: "attnkit-download",
        title: tr("download this view as {format}", { format: fmt.toUpperCase() }) });
      b.dataset.format = fmt;
      b.addEventListener("click", async () => {
        const text = ns.snapshotSVG(body);
        const name = `${spec.filename || "attention"}-${st.view}.${fmt}`;
        if (fmt === "svg") return download(name, new Blob([text], { type: "image/svg+xml" }));
        try {
          download(name, await svgToPng(text, body.scrollWidth, body.scrollHeight));
        } catch (e) {
          note(tr('could not draw the PNG here ({error}); download the SVG, or use .save("x.png")', { error: e.message }));
        }
      });
      bar.appendChild(b);
    }
    ns.hideTip();
    const onPick = (l, h) => { Object.assign(st, { view: "matrix", layer: l, head: h }); redraw(); };
    const view = st.view === "head" ? ns.headView(p, st, note) :
      st.view === "model" ? ns.modelView(p, st, note, onPick) : ns.matrixView(p, st, note);
    body.replaceChildren(view);
    Object.assign(root.dataset, { view: st.view, panel: p.spec.key, layer: st.layer, head: st.head });
  }

  /** Mount the view in `root` (a .attnkit-view element) from its embedded data. */
  ns.mount = async function mount(root) {
    if (!root || root.dataset.state) return;
    root.dataset.state = "loading";
    const started = performance.now();
    const message = root.querySelector(".attnkit-message");
    // the view's words, as attnkit's catalog gave them when it was drawn (English: none)
    const words = root.querySelector("script.attnkit-i18n");
    let tr = ns.translator(null);
    try {
      tr = ns.translator(words ? JSON.parse(words.textContent) : null);
      const spec = JSON.parse(root.querySelector("script.attnkit-data").textContent);
      const panels = await Promise.all(spec.panels.map((s) => ns.decodePanel(s, tr)));
      const st = { panel: spec.panel || 0, view: spec.view, layer: spec.layer, head: spec.head, thumb: spec.thumb, tr };
      root.querySelector(".attnkit-live").hidden = false;
      render(root, spec, panels, st);
      root.querySelector(".attnkit-fallback").hidden = true;
      root.dataset.renderMs = String(Math.round(performance.now() - started));
      root.dataset.state = "ready";
    } catch (e) {
      message.textContent = tr("the interactive view could not start ({error}); the static picture stays", { error: e.message });
      message.hidden = false;
      root.dataset.state = "error";
    }
  };
})(window.attnkitViews = window.attnkitViews || {});
