// timeline.js — one input's chart: allocated memory stacked by group, the allocated and
// reserved totals, step boundaries and the peaks, over a window of moments (VZ.view, shared by
// all charts as fractions of each run, so two inputs zoom together).
//
// Level of detail: where a pixel column spans several moments, it draws the column's true
// minimum and maximum of allocated and reserved memory (VZ.Pyramid) and the stack at the
// column's highest moment, so no spike is merged away; zoomed in to under a moment per pixel,
// every moment is its own step. Hover and click map a pixel back to its moment exactly (the
// highest one of its column, or the moment itself when zoomed in), so every event is reachable.
'use strict';
VZ.view = { f0: 0, f1: 1 }; // the visible window, as fractions of each run's moments
VZ.PAD = { l: 78, r: 12, t: 16, b: 24 };

VZ.Chart = function (run, parent) {
  this.run = run;
  const box = document.createElement('div');
  box.className = 'panel';
  box.innerHTML = '<div><span class="name"></span> <span class="note"></span></div><div class="legend"></div>' +
    '<canvas height="320"></canvas><div class="readout"></div>';
  parent.appendChild(box);
  box.querySelector('.name').textContent = run.meta.name + ' (' + run.meta.kind + ', ' + run.N.toLocaleString('en-US') + ' events)';
  box.querySelector('.note').textContent = run.meta.note;
  this.legend = box.querySelector('.legend');
  this.canvas = box.querySelector('canvas');
  this.readout = box.querySelector('.readout');
  this.readout.id = 'readout-' + run.index;
  this.canvas.id = 'chart-' + run.index;
  this.hover = -1;
};

// The visible moments [m0, m1] (floats) of this run.
VZ.Chart.prototype.span = function () {
  const last = Math.max(1, this.run.M - 1);
  if (VZ.xaxis === 'time' && this.run.hasTime) {
    const t0 = this.run.timeOf(0), t1 = this.run.timeOf(this.run.M - 1);
    return { time: true, t0: t0 + VZ.view.f0 * (t1 - t0), t1: t0 + VZ.view.f1 * (t1 - t0) };
  }
  return { time: false, m0: VZ.view.f0 * last, m1: VZ.view.f1 * last };
};

// Pixel x (CSS pixels from the canvas's left) of moment m, for the span sp.
VZ.Chart.prototype.xOf = function (m, sp, pw) {
  if (sp.time) return VZ.PAD.l + (this.run.timeOf(m) - sp.t0) / (sp.t1 - sp.t0 || 1) * pw;
  return VZ.PAD.l + (m - sp.m0) / (sp.m1 - sp.m0 || 1) * pw;
};

// The moments of pixel column c (0-based in the plot): [lo, hi], or null when none.
VZ.Chart.prototype.column = function (c, sp, pw) {
  const M = this.run.M;
  let lo, hi;
  if (sp.time) {
    // the moments in force during the column's time: from the last one at or before its start
    const dt = (sp.t1 - sp.t0) / pw, a = sp.t0 + c * dt;
    hi = this.run.momentAt(sp.t0 + (c + 1) * dt) - 1;
    if (c === pw - 1) hi = Math.max(hi, this.run.momentAt(sp.t1));
    lo = this.run.momentAt(a);
    if (lo > 0 && (lo > hi || this.run.timeOf(lo) > a)) lo--;
    hi = Math.max(hi, lo);
  } else {
    const per = (sp.m1 - sp.m0) / pw;
    lo = Math.ceil(sp.m0 + c * per - 1e-9);
    hi = Math.ceil(sp.m0 + (c + 1) * per - 1e-9) - 1;
    if (per < 1) lo = hi = Math.min(M - 1, Math.max(0, Math.round(sp.m0 + (c + 0.5) * per)));
  }
  lo = Math.max(0, lo);
  hi = Math.min(M - 1, hi);
  return lo <= hi ? [lo, hi] : null;
};

VZ.Chart.prototype.resize = function () {
  const dpr = window.devicePixelRatio || 1, w = this.canvas.clientWidth || 1200;
  this.cssW = w;
  this.cssH = 320;
  if (this.canvas.width !== Math.round(w * dpr)) {
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(320 * dpr);
  }
};

VZ.Chart.prototype.draw = function () {
  this.resize();
  const run = this.run, ctx = this.canvas.getContext('2d'), dpr = window.devicePixelRatio || 1;
  const W = this.cssW, H = this.cssH, P = VZ.PAD, pw = Math.max(1, Math.floor(W - P.l - P.r)), ph = H - P.t - P.b;
  const sp = this.span();
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  // Columns: the moments each covers and its extremes.
  const cols = new Array(pw);
  let ymax = 1;
  for (let c = 0; c < pw; c++) {
    const r = this.column(c, sp, pw);
    if (!r) continue;
    const [aMax, aMin] = run.pAlloc.query(r[0], r[1]), [rMax, rMin] = run.pRes.query(r[0], r[1]);
    cols[c] = { lo: r[0], hi: r[1], aMax, aMin, rMax, rMin };
    ymax = Math.max(ymax, run.reserved[rMax], run.alloc[aMax]);
  }
  this.cols = cols;
  const [unit, div] = VZ.unitFor(ymax);
  const ytop = this.niceTop(ymax / div) * div, y = (v) => P.t + ph - v / ytop * ph;
  this.y = y;
  this.drawAxes(ctx, W, H, pw, ph, ytop, unit, div, sp);
  // The stack: each group's band at the column's highest moment.
  const G = run.groupNames.length, vals = new Float64Array(G);
  const tops = [];
  for (let g = 0; g < G; g++) tops.push(new Float64Array(pw));
  for (let c = 0; c < pw; c++) {
    if (!cols[c]) continue;
    run.groupsAt(cols[c].aMax, vals);
    let acc = 0;
    for (let g = 0; g < G; g++) { acc += vals[g]; tops[g][c] = acc; }
  }
  for (let g = G - 1; g >= 0; g--) {
    ctx.fillStyle = VZ.color(g);
    ctx.beginPath();
    for (let c = 0; c < pw; c++) if (cols[c]) ctx.rect(P.l + c, y(tops[g][c]), 1, y(0) - y(tops[g][c]));
    ctx.fill();
  }
  // Totals: allocated (dark) and reserved (red), each column from its minimum to its maximum.
  this.drawEnvelope(ctx, cols, pw, 'aMin', 'aMax', run.alloc, '#1d2330');
  this.drawEnvelope(ctx, cols, pw, 'rMin', 'rMax', run.reserved, '#d62728');
  this.drawMarks(ctx, sp, pw, ph);
  this.drawLegend();
};

VZ.Chart.prototype.niceTop = function (v) {
  const steps = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(v, 1e-9))));
  for (const s of steps) if (s * p >= v * 1.04) return s * p;
  return 10 * p;
};

VZ.Chart.prototype.drawAxes = function (ctx, W, H, pw, ph, ytop, unit, div, sp) {
  const P = VZ.PAD;
  ctx.strokeStyle = '#e5e7eb';
  ctx.fillStyle = '#4b5563';
  ctx.font = '11px system-ui, sans-serif';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  for (let i = 0; i <= 4; i++) {
    const v = ytop * i / 4, yy = Math.round(P.t + ph - ph * i / 4) + 0.5;
    ctx.beginPath(); ctx.moveTo(P.l, yy); ctx.lineTo(P.l + pw, yy); ctx.stroke();
    ctx.fillText((v / div).toFixed(v / div < 10 && i ? 2 : 1) + ' ' + unit, P.l - 6, yy + 4);
  }
  ctx.textAlign = 'center';
  if (sp.time) {
    for (let i = 0; i <= 6; i++) {
      const label = '+' + ((sp.t0 + (sp.t1 - sp.t0) * i / 6 - this.run.timeOf(0)) / 1e6).toFixed(3) + ' s';
      ctx.fillText(label, Math.min(Math.max(P.l + pw * i / 6, P.l + 30), P.l + pw - 30), H - 6);
    }
    return;
  }
  // ticks at a whole number of events: 1, 2 or 5 times a power of ten, about six across
  const raw = Math.max(1, (sp.m1 - sp.m0) / 6), p10 = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((k) => k * p10).find((v) => v >= raw);
  for (let m = Math.ceil(sp.m0 / step) * step; m <= sp.m1; m += step) {
    const x = this.xOf(m, sp, pw);
    ctx.fillText('event ' + m.toLocaleString('en-US'), Math.min(Math.max(x, P.l + 30), P.l + pw - 30), H - 6);
  }
};

VZ.Chart.prototype.drawEnvelope = function (ctx, cols, pw, kMin, kMax, v, color) {
  const P = VZ.PAD, y = this.y;
  ctx.fillStyle = color;
  ctx.beginPath();
  let prev = null;
  for (let c = 0; c < pw; c++) {
    const col = cols[c];
    if (!col) { prev = null; continue; }
    let top = y(v[col[kMax]]), bot = y(v[col[kMin]]);
    if (prev) { top = Math.min(top, prev[1]); bot = Math.max(bot, prev[0]); } // join to the last column
    ctx.rect(P.l + c, Math.floor(top), 1, Math.max(1.5, bot - top));
    prev = [y(v[col[kMax]]), y(v[col[kMin]])];
  }
  ctx.fill();
};

VZ.Chart.prototype.drawMarks = function (ctx, sp, pw, ph) {
  const run = this.run, P = VZ.PAD, inside = (x) => x >= P.l && x <= P.l + pw;
  ctx.save();
  ctx.setLineDash([3, 3]);
  ctx.strokeStyle = '#6b7280';
  ctx.fillStyle = '#374151';
  ctx.textAlign = 'left';
  let lastLabel = -1e9, lastLine = -1e9; // lines at least 6 px apart (a run of thousands of steps stays readable)
  for (const [ev, label] of run.meta.steps) {
    const x = Math.round(this.xOf(ev, sp, pw)) + 0.5;
    if (!inside(x) || x - lastLine < 6) continue;
    lastLine = x;
    ctx.beginPath(); ctx.moveTo(x, P.t); ctx.lineTo(x, P.t + ph); ctx.stroke();
    if (x - lastLabel > 110) { ctx.fillText(label.slice(0, 24), x + 3, P.t + 10); lastLabel = x; }
  }
  ctx.restore();
  const mark = (m, v, color, text, lift) => {
    const x = this.xOf(m, sp, pw), yy = this.y(v) - (lift || 0);
    if (!inside(x)) return;
    ctx.fillStyle = color;
    ctx.beginPath(); ctx.moveTo(x, yy - 2); ctx.lineTo(x - 5, yy - 10); ctx.lineTo(x + 5, yy - 10); ctx.fill();
    ctx.textAlign = x > P.l + pw - 220 ? 'right' : 'left';
    ctx.fillText(text, x + (ctx.textAlign === 'left' ? 7 : -7), yy - 4);
  };
  const rx = this.xOf(run.peakResMoment, sp, pw), ax = this.xOf(run.peakAllocMoment, sp, pw);
  const near = Math.abs(rx - ax) < 240 && Math.abs(this.y(run.reserved[run.peakResMoment]) - this.y(run.alloc[run.peakAllocMoment])) < 16;
  mark(run.peakResMoment, run.reserved[run.peakResMoment], '#d62728', 'peak reserved ' + VZ.fmt(run.reserved[run.peakResMoment]), near ? 14 : 0);
  mark(run.peakAllocMoment, run.alloc[run.peakAllocMoment], '#1d2330', 'peak allocated ' + VZ.fmt(run.alloc[run.peakAllocMoment]));
  const k = VZ.picked && VZ.picked[run.index];
  if (k !== undefined && k >= 0) { // the chosen allocation's lifetime, as a band under the plot
    const a = this.xOf(run.aEv[k] + 1, sp, pw), f = run.fEv[k] < 0 ? P.l + pw : this.xOf(run.fEv[k] + 1, sp, pw);
    const x0 = Math.max(P.l, Math.min(a, P.l + pw)), x1 = Math.max(P.l, Math.min(f, P.l + pw));
    ctx.fillStyle = 'rgba(37, 99, 235, 0.85)';
    ctx.fillRect(x0, P.t + ph - 4, Math.max(2, x1 - x0), 4);
  }
  if (VZ.selected !== undefined && VZ.selected[run.index] !== undefined) {
    const x = Math.round(this.xOf(VZ.selected[run.index], sp, pw)) + 0.5;
    if (inside(x)) {
      ctx.strokeStyle = '#2563eb'; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(x, P.t); ctx.lineTo(x, P.t + ph); ctx.stroke();
    }
  }
};

VZ.Chart.prototype.drawLegend = function () {
  const run = this.run;
  const key = run.groupNames.map((n, g) => '<span><i style="background:' + VZ.color(g) + '"></i>' + VZ.esc(n) + '</span>').join('');
  const html = key + '<span><i style="background:#1d2330"></i>allocated</span><span><i style="background:#d62728"></i>reserved</span>';
  if (this.legend.innerHTML !== html) this.legend.innerHTML = html;
};

VZ.esc = function (s) { return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]); };

// The moment under CSS pixel x: the column's highest moment (its peak), or null.
VZ.Chart.prototype.momentAtX = function (x) {
  const c = Math.floor(x - VZ.PAD.l);
  if (!this.cols || c < 0 || c >= this.cols.length || !this.cols[c]) return null;
  const col = this.cols[c];
  return col.lo === col.hi ? col.lo : col.aMax;
};

// The readout: the figures at moment m, exactly, and the event that led there.
VZ.Chart.prototype.showMoment = function (m) {
  const run = this.run, el = this.readout;
  el.dataset.moment = m;
  el.dataset.allocated = run.alloc[m];
  el.dataset.reserved = run.reserved[m];
  el.dataset.requested = run.requested[m];
  let text = 'moment ' + m.toLocaleString('en-US') + (m ? ' (after event ' + (m - 1).toLocaleString('en-US') + ')' : ' (before the first event)');
  if (run.hasTime) text += ', +' + ((run.timeOf(m) - run.timeOf(0)) / 1e6).toFixed(6) + ' s';
  text += '\nallocated ' + VZ.exact(run.alloc[m]) + '   reserved ' + VZ.exact(run.reserved[m]) +
    '   requested ' + VZ.exact(run.requested[m]);
  if (m > 0) text += '\n' + VZ.describeEvent(run, m - 1);
  el.textContent = text;
};

VZ.describeEvent = function (run, i) {
  const x = run.ev[i], k = x >>> 1;
  return 'event ' + i.toLocaleString('en-US') + ': ' + (x & 1 ? 'free' : 'alloc') + ' of allocation #' + k + ', ' +
    VZ.fmt(run.blk[k]) + ' block (' + run.req[k].toLocaleString('en-US') + ' bytes requested), ' +
    run.meta.tags[run.tag[k]] + ', stream ' + run.stream[k] + (run.stack[k] >= 0 ? ', ' + run.topFrame(run.stack[k]) : '');
};
