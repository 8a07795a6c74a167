// selftest.js — the page testing itself in a real browser, only when its address ends in
// #selftest[&xaxis=time][&group=frame|stream] (tests/viz_check.py and bench/viz_bench.py open it so with headless Chromium and read
// the result from the DOM: chromium --dump-dom). Through synthetic mouse and wheel events, as a
// user would: hovers chosen moments (#selftest&m0=5,peak,end&m1=...) and reads the figures the
// readout shows; clicks them and reads the allocator layout's sums; zooms and pans, timing each
// frame; zooms in to a few moments and checks that every one of them can be hovered. Writes
// one JSON object into <pre id="vram-selftest">, errors of the page included.
'use strict';
(function () {
  if (!location.hash.startsWith('#selftest')) return;
  const params = new URLSearchParams(location.hash.slice(1).replace(/^selftest&?/, ''));
  const out = { firstPaintMs: VZ.firstPaintMs, runs: [] };
  const fire = (el, type, x, y, extra) => {
    const r = el.getBoundingClientRect();
    const init = Object.assign({ clientX: r.left + x, clientY: r.top + y, bubbles: true, cancelable: true }, extra || {});
    el.dispatchEvent(type === 'wheel' ? new WheelEvent(type, init) : new MouseEvent(type, init));
  };
  const median = (a) => { const s = a.slice().sort((x, y) => x - y); return s.length ? s[s.length >> 1] : null; };
  const around = (run, m, width) => { // the view: `width` moments centred on m
    const last = Math.max(1, run.M - 1);
    let f = m / last, w = Math.min(1, width / last);
    if (VZ.xaxis === 'time' && run.hasTime) { // the same, measured in time
      const t = (k) => run.timeOf(Math.max(0, Math.min(last, k))), span = t(last) - t(0) || 1;
      f = (t(m) - t(0)) / span;
      w = Math.min(1, Math.max((t(m + width / 2) - t(m - width / 2)) / span, 1e-9));
    }
    VZ.view.f0 = Math.max(0, Math.min(1 - w, f - w / 2));
    VZ.view.f1 = VZ.view.f0 + w;
    VZ.redraw();
  };
  try {
    if (params.get('xaxis') === 'time') VZ.xaxis = 'time';
    if (params.get('group')) { VZ.setGroups(params.get('group')); out.groups = VZ.runs.map((r) => r.groupNames); }
    VZ.runs.forEach((run, i) => {
      const chart = VZ.charts[i], res = { name: run.meta.name, N: run.N, meta: Object.assign({}, run.meta), moments: [] };
      delete res.meta.arrays;
      delete res.meta.stacks;
      res.peakAllocMoment = run.peakAllocMoment;
      res.peakResMoment = run.peakResMoment;
      VZ.view.f0 = 0; VZ.view.f1 = 1; VZ.redraw();
      let drawnAlloc = 0, drawnRes = 0; // the tops of the drawn envelopes, whole run in view
      for (const c of chart.cols) if (c) { drawnAlloc = Math.max(drawnAlloc, run.alloc[c.aMax]); drawnRes = Math.max(drawnRes, run.reserved[c.rMax]); }
      res.drawnPeakAllocated = drawnAlloc;
      res.drawnPeakReserved = drawnRes;
      const want = (params.get('m' + i) || 'peak,end').split(',').filter(Boolean);
      for (const w of want) {
        const m = w === 'peak' ? run.peakAllocMoment : w === 'end' ? run.M - 1 : w === 'respeak' ? run.peakResMoment : parseInt(w, 10);
        around(run, m, 40);
        const c = chart.cols.findIndex((col) => col && col.lo <= m && m <= col.hi), x = VZ.PAD.l + Math.max(0, c) + 0.5;
        fire(chart.canvas, 'mousemove', x, 100);
        const d = chart.readout.dataset;
        fire(chart.canvas, 'mousedown', x, 100, { buttons: 1 });
        fire(chart.canvas, 'mouseup', x, 100);
        const l = VZ.layouts[i].sums.dataset;
        res.moments.push({ asked: w, moment: m, hovered: +d.moment, allocated: +d.allocated, reserved: +d.reserved,
          requested: +d.requested, layoutMoment: +l.moment, layoutAllocated: +l.allocated, layoutReserved: +l.reserved,
          readout: chart.readout.textContent, details: document.getElementById('details').textContent.slice(0, 2000) });
      }
      // Every moment of a zoomed-in window can be hovered.
      const mid = run.peakAllocMoment;
      around(run, mid, 30);
      const seen = new Set(), shown = chart.cols.filter((c) => c);
      for (let x = VZ.PAD.l; x < chart.cssW - VZ.PAD.r; x++) {
        fire(chart.canvas, 'mousemove', x + 0.5, 100);
        seen.add(+chart.readout.dataset.moment);
      }
      const lo = shown.length ? shown[0].lo : 0, hi = shown.length ? shown[shown.length - 1].hi : -1;
      let missing = 0;
      for (let m = lo; m <= hi; m++) if (!seen.has(m)) missing++;
      res.reachable = { from: lo, to: hi, missing };
      out.runs.push(res);
    });
    // Zoom (wheel) and pan (drag) on the first chart, each frame timed.
    const chart = VZ.charts[0], cx = chart.cssW / 2;
    VZ.view.f0 = 0; VZ.view.f1 = 1; VZ.redraw();
    const steps = +(params.get('steps') || 12);
    let n0 = VZ.frames.length;
    for (let k = 0; k < steps; k++) fire(chart.canvas, 'wheel', cx, 100, { deltaY: -100 });
    out.zoom = { width: VZ.view.f1 - VZ.view.f0, frames: VZ.frames.slice(n0) };
    VZ.zoom(1 / Math.pow(0.8, steps / 2)); // half way back out: a window of many events to pan over
    VZ.redraw();
    const f0 = VZ.view.f0;
    n0 = VZ.frames.length;
    fire(chart.canvas, 'mousedown', cx, 100, { buttons: 1 });
    for (let k = 1; k <= steps; k++) fire(chart.canvas, 'mousemove', cx - k * 20, 100, { buttons: 1 });
    fire(chart.canvas, 'mouseup', cx - steps * 20, 100);
    out.pan = { moved: VZ.view.f0 - f0, frames: VZ.frames.slice(n0) };
    out.zoom.median = median(out.zoom.frames);
    out.pan.median = median(out.pan.frames);
    out.maxFrameMs = Math.max(...out.zoom.frames, ...out.pan.frames);
    VZ.view.f0 = 0; VZ.view.f1 = 1; VZ.redraw();
  } catch (e) {
    out.exception = String(e && e.stack ? e.stack : e);
  }
  out.errors = window.VZ_ERRORS;
  const pre = document.getElementById('vram-selftest');
  pre.textContent = JSON.stringify(out);
})();
