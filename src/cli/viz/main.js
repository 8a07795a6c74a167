// main.js — builds the page from its data and wires the controls: wheel to zoom about the
// pointer, drag to pan, hover for the figures at a moment, click to choose the moment the
// allocator's layout and the details show, double-click for the whole run. Every redraw is
// timed (VZ.frames), and the time to the first complete picture is kept (VZ.firstPaintMs).
'use strict';
VZ.frames = [];
VZ.selected = [];
VZ.picked = []; // per input, the allocation whose details show (its lifetime is marked)
VZ.xaxis = 'events';

VZ.redraw = function () {
  const t0 = performance.now();
  for (const c of VZ.charts) c.draw();
  if (VZ.charts.length) VZ.charts[0].canvas.getContext('2d').getImageData(0, 0, 1, 1); // the drawing done, not queued
  VZ.frames.push(performance.now() - t0);
};

VZ.scheduled = false;
VZ.schedule = function () {
  if (VZ.scheduled) return;
  VZ.scheduled = true;
  requestAnimationFrame(() => { VZ.scheduled = false; VZ.redraw(); });
};

// Zooms the shared window by `factor` (< 1: in) about fraction f.
VZ.zoom = function (factor, f) {
  const v = VZ.view, w = v.f1 - v.f0;
  const maxM = Math.max(...VZ.runs.map((r) => r.M));
  const nw = Math.min(1, Math.max(w * factor, 4 / Math.max(maxM, 4)));
  if (f === undefined) f = (v.f0 + v.f1) / 2;
  let f0 = f - (f - v.f0) * nw / w;
  f0 = Math.max(0, Math.min(1 - nw, f0));
  v.f0 = f0;
  v.f1 = f0 + nw;
};
VZ.pan = function (df) {
  const v = VZ.view, w = v.f1 - v.f0, f0 = Math.max(0, Math.min(1 - w, v.f0 + df));
  v.f0 = f0;
  v.f1 = f0 + w;
};

VZ.select = function (ri, m) {
  VZ.selected[ri] = m;
  VZ.layouts[ri].show(m);
  const run = VZ.runs[ri], vals = run.groupsAt(m, new Float64Array(run.groupNames.length));
  let text = run.meta.name + ', moment ' + m.toLocaleString('en-US') + ': allocated ' + VZ.exact(run.alloc[m]) +
    ', reserved ' + VZ.exact(run.reserved[m]) + '\n\nlive by ' + VZ.groupMode + ':\n';
  const order = [...vals.keys()].sort((a, b) => vals[b] - vals[a]);
  for (const g of order) if (vals[g]) text += '  ' + VZ.fmt(vals[g]).padStart(12) + '  ' + run.groupNames[g] + '\n';
  VZ.picked[ri] = m > 0 ? run.ev[m - 1] >>> 1 : -1;
  if (m > 0) text += '\n' + VZ.describeEvent(run, m - 1) + '\n\n' + VZ.describeAlloc(run, run.ev[m - 1] >>> 1);
  document.getElementById('details').textContent = text;
  VZ.schedule();
};

VZ.tip = function (e, text) {
  const tip = document.getElementById('tip');
  if (!text) { tip.hidden = true; return; }
  tip.hidden = false;
  tip.textContent = text;
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
  tip.style.top = e.clientY + 14 + 'px';
};

VZ.wireChart = function (chart, ri) {
  const cv = chart.canvas, plotW = () => Math.max(1, chart.cssW - VZ.PAD.l - VZ.PAD.r);
  const frac = (x) => VZ.view.f0 + (x - VZ.PAD.l) / plotW() * (VZ.view.f1 - VZ.view.f0);
  let drag = null;
  cv.addEventListener('wheel', (e) => {
    e.preventDefault();
    const x = e.offsetX;
    VZ.zoom(e.deltaY < 0 ? 0.8 : 1.25, Math.max(0, Math.min(1, frac(x))));
    VZ.redraw();
  }, { passive: false });
  cv.addEventListener('mousedown', (e) => { drag = { x: e.offsetX, f0: VZ.view.f0, moved: false }; });
  cv.addEventListener('mousemove', (e) => {
    if (drag && e.buttons) {
      const dx = e.offsetX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      if (drag.moved) {
        VZ.pan(drag.f0 - VZ.view.f0 - dx / plotW() * (VZ.view.f1 - VZ.view.f0));
        VZ.redraw();
      }
      return;
    }
    const m = chart.momentAtX(e.offsetX);
    if (m === null) { VZ.tip(e, null); return; }
    chart.showMoment(m);
    const run = chart.run;
    VZ.tip(e, 'moment ' + m.toLocaleString('en-US') + '\nallocated ' + VZ.fmt(run.alloc[m]) + '\nreserved  ' + VZ.fmt(run.reserved[m]) +
      (m > 0 ? '\n' + (run.ev[m - 1] & 1 ? 'free ' : 'alloc ') + VZ.fmt(run.blk[run.ev[m - 1] >>> 1]) + ' ' +
        run.meta.tags[run.tag[run.ev[m - 1] >>> 1]] : ''));
  });
  cv.addEventListener('mouseleave', (e) => VZ.tip(e, null));
  cv.addEventListener('mouseup', (e) => {
    const moved = drag && drag.moved;
    drag = null;
    if (moved) return;
    const m = chart.momentAtX(e.offsetX);
    if (m !== null) VZ.select(ri, m);
  });
  cv.addEventListener('dblclick', () => { VZ.view.f0 = 0; VZ.view.f1 = 1; VZ.redraw(); });
};

VZ.wireLayout = function (layout, ri) {
  const cv = layout.canvas, find = (e) => layout.itemAt(e.offsetX, e.offsetY);
  cv.addEventListener('mousemove', (e) => {
    const it = find(e), run = VZ.runs[ri];
    if (!it) { VZ.tip(e, null); return; }
    VZ.tip(e, it.k < 0 ? 'free hole: ' + VZ.exact(it.b - it.a) : 'allocation #' + it.k + ': ' + VZ.fmt(run.blk[it.k]) + ' ' +
      run.meta.tags[run.tag[it.k]] + (run.stack[it.k] >= 0 ? '\n' + run.topFrame(run.stack[it.k]) : ''));
  });
  cv.addEventListener('mouseleave', (e) => VZ.tip(e, null));
  cv.addEventListener('click', (e) => {
    const it = find(e);
    if (!it || it.k < 0) return;
    document.getElementById('details').textContent = VZ.describeAlloc(VZ.runs[ri], it.k);
    VZ.picked[ri] = it.k;
    VZ.schedule();
  });
};

VZ.setGroups = function (mode) {
  VZ.groupMode = mode === 'tag' ? 'category' : mode === 'frame' ? 'top stack frame' : 'stream';
  for (const r of VZ.runs) r.setGroups(mode);
  for (let i = 0; i < VZ.runs.length; i++) if (VZ.selected[i] !== undefined) VZ.layouts[i].show(VZ.selected[i]);
};

VZ.start = function () {
  const meta = JSON.parse(document.getElementById('vram-meta').textContent);
  VZ.runs = meta.map((m, i) => new VZ.Run(m, VZ.decode('vram-data-' + i), i));
  VZ.charts = VZ.runs.map((r) => new VZ.Chart(r, document.getElementById('charts')));
  VZ.layouts = VZ.runs.map((r) => new VZ.Layout(r, document.getElementById('layouts')));
  VZ.setGroups('tag');
  VZ.charts.forEach((c, i) => VZ.wireChart(c, i));
  VZ.layouts.forEach((l, i) => VZ.wireLayout(l, i));
  const xaxis = document.getElementById('xaxis');
  if (!VZ.runs.every((r) => r.hasTime)) { xaxis.disabled = true; xaxis.title = 'only snapshots carry wall times'; }
  xaxis.addEventListener('change', () => { VZ.xaxis = xaxis.value; VZ.redraw(); });
  document.getElementById('group').addEventListener('change', (e) => { VZ.setGroups(e.target.value); VZ.redraw(); });
  document.getElementById('zoom-in').addEventListener('click', () => { VZ.zoom(0.5); VZ.redraw(); });
  document.getElementById('zoom-out').addEventListener('click', () => { VZ.zoom(2); VZ.redraw(); });
  document.getElementById('zoom-reset').addEventListener('click', () => { VZ.view.f0 = 0; VZ.view.f1 = 1; VZ.redraw(); });
  VZ.runs.forEach((r, i) => { VZ.selected[i] = r.peakAllocMoment; VZ.charts[i].showMoment(r.peakAllocMoment); });
  VZ.redraw();
  VZ.runs.forEach((r, i) => VZ.select(i, r.peakAllocMoment));
  if (VZ.runs.length > 1) {
    document.getElementById('compare-sec').hidden = false;
    VZ.compare(VZ.runs, document.getElementById('compare'));
  }
  VZ.firstPaintMs = performance.now();
  window.addEventListener('resize', () => VZ.schedule());
};

try {
  VZ.start();
} catch (e) {
  console.error('vram viz: ' + (e && e.stack ? e.stack : e));
  document.getElementById('charts').textContent = 'This page could not draw its data: ' + e;
}
