// data.js — one input of the page as typed arrays, and the figures drawn from them.
//
// A run has N events and N+1 moments: moment 0 is before the first event, moment m is just
// after event m-1. The exporter (src/cli/viz_model.h) gives, per event, the allocation it
// allocates or frees; per allocation, its requested and block bytes, address, events, stream,
// tag and stack; the reserved-memory changes; and the segments as signed address ranges.
// From them: allocated, requested and reserved memory at every moment (Float64Array, exact
// integers), a min/max pyramid over each (levels of 64, so any range's extremes cost a few
// hundred steps: the level of detail that keeps every event drawn), and per-group running sums
// kept every 256 moments, so a stacked band at any moment costs at most 256 steps.
'use strict';
const VZ = window.VZ = { GiB: 1073741824, MiB: 1048576, KiB: 1024 };

VZ.decode = function (id) {
  const bin = atob(document.getElementById(id).textContent);
  const n = bin.length, u8 = new Uint8Array(n);
  for (let i = 0; i < n; i++) u8[i] = bin.charCodeAt(i);
  return u8.buffer;
};

// A min/max pyramid over v: query(lo, hi) gives the indices of the largest and smallest value
// in v[lo..hi] (the first of equals for the largest).
VZ.Pyramid = function (v) {
  this.v = v;
  this.imax = [];
  this.imin = [];
  let n = v.length, prevMax = null, prevMin = null;
  while (n > 64) {
    const m = Math.ceil(n / 64), mx = new Int32Array(m), mn = new Int32Array(m);
    for (let b = 0; b < m; b++) {
      const end = Math.min(n, (b + 1) * 64);
      let bi = prevMax ? prevMax[b * 64] : b * 64, si = prevMin ? prevMin[b * 64] : b * 64;
      for (let j = b * 64 + 1; j < end; j++) {
        const a = prevMax ? prevMax[j] : j, c = prevMin ? prevMin[j] : j;
        if (v[a] > v[bi]) bi = a;
        if (v[c] < v[si]) si = c;
      }
      mx[b] = bi;
      mn[b] = si;
    }
    this.imax.push(mx);
    this.imin.push(mn);
    prevMax = mx;
    prevMin = mn;
    n = m;
  }
};
VZ.Pyramid.prototype.query = function (lo, hi) {
  const v = this.v;
  let best = lo, worst = lo, a = lo, b = hi + 1, L = 0;
  const take = (j) => {
    const x = L ? this.imax[L - 1][j] : j, y = L ? this.imin[L - 1][j] : j;
    if (v[x] > v[best] || (v[x] === v[best] && x < best)) best = x;
    if (v[y] < v[worst]) worst = y;
  };
  while (a < b) {
    if (L < this.imax.length && b - a >= 128) {
      while (a % 64 && a < b) take(a++);
      while (b % 64 && a < b) take(--b);
      a /= 64;
      b /= 64;
      L++;
    } else {
      for (; a < b; a++) take(a);
    }
  }
  return [best, worst];
};

VZ.TYPES = { u32: Uint32Array, i32: Int32Array, f64: Float64Array, u16: Uint16Array, u8: Uint8Array };
VZ.CP = 256; // moments between kept group sums

VZ.Run = function (meta, buf, index) {
  this.meta = meta;
  this.index = index;
  for (const [name, [type, off, len]] of Object.entries(meta.arrays)) this[name] = new VZ.TYPES[type](buf, off, len);
  const N = this.N = meta.nEvents, M = this.M = N + 1, A = meta.nAllocs;
  this.alloc = new Float64Array(M);
  this.requested = new Float64Array(M);
  this.reserved = new Float64Array(M);
  let a = meta.alloc0, r = 0;
  for (let k = 0; k < A; k++) if (this.aEv[k] < 0) r += this.req[k];
  this.alloc[0] = a;
  this.requested[0] = r;
  const ev = this.ev, blk = this.blk, req = this.req;
  for (let i = 0; i < N; i++) {
    const x = ev[i], k = x >>> 1;
    if (x & 1) { a -= blk[k]; r -= req[k]; } else { a += blk[k]; r += req[k]; }
    this.alloc[i + 1] = a;
    this.requested[i + 1] = r;
  }
  let cur = meta.reserved0, j = 0;
  this.reserved[0] = cur;
  for (let m = 1; m < M; m++) {
    while (j < this.resEv.length && this.resEv[j] === m - 1) cur = this.resVal[j++];
    this.reserved[m] = cur;
  }
  this.pAlloc = new VZ.Pyramid(this.alloc);
  this.pRes = new VZ.Pyramid(this.reserved);
  this.peakAllocMoment = this.pAlloc.query(0, M - 1)[0];
  this.peakResMoment = this.pRes.query(0, M - 1)[0];
  this.hasTime = !!this.time && N > 0;
};

// The time of moment m in microseconds (moment 0: the first event's).
VZ.Run.prototype.timeOf = function (m) { return this.time[Math.max(0, Math.min(this.N - 1, m - 1))]; };
// The first moment at or after time t (binary search).
VZ.Run.prototype.momentAt = function (t) {
  let lo = 0, hi = this.M - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (this.timeOf(mid) < t) lo = mid + 1; else hi = mid;
  }
  return lo;
};

// Top frame of stack s (its first line), or null.
VZ.Run.prototype.topFrame = function (s) { return s < 0 ? null : this.meta.stacks[s].split('\n')[0]; };

// Groups by `mode` (tag, frame, stream): names, the group of each allocation, and the kept
// sums. Frames: the 12 top frames holding the most bytes at the peak, the rest as one group.
VZ.Run.prototype.setGroups = function (mode) {
  const A = this.meta.nAllocs, g = new Uint16Array(A);
  let names = [];
  if (mode === 'tag') {
    names = this.meta.tags.slice();
    for (let k = 0; k < A; k++) g[k] = this.tag[k];
  } else if (mode === 'stream') {
    const ids = new Map();
    for (let k = 0; k < A; k++) {
      const s = this.stream[k];
      if (!ids.has(s)) { ids.set(s, names.length); names.push(s === 65535 ? 'stream (other)' : 'stream ' + s); }
      g[k] = ids.get(s);
    }
  } else {
    const peak = this.peakAllocMoment, bytes = new Map();
    for (let k = 0; k < A; k++) {
      const f = this.topFrame(this.stack[k]) || '(no stack)';
      if (this.aEv[k] < peak && (this.fEv[k] < 0 || this.fEv[k] >= peak)) bytes.set(f, (bytes.get(f) || 0) + this.blk[k]);
      else if (!bytes.has(f)) bytes.set(f, 0);
    }
    const top = [...bytes.entries()].sort((x, y) => y[1] - x[1]).slice(0, 12).map((e) => e[0]);
    const ids = new Map(top.map((f, i) => [f, i]));
    names = top.slice();
    const rest = names.length;
    if (bytes.size > top.length) names.push('(other frames)');
    for (let k = 0; k < A; k++) {
      const id = ids.get(this.topFrame(this.stack[k]) || '(no stack)');
      g[k] = id === undefined ? rest : id;
    }
  }
  this.groupNames = names;
  this.group = g;
  const G = names.length, C = VZ.CP, nc = Math.floor(this.M / C) + 1, cp = new Float64Array(nc * G);
  const sums = new Float64Array(G);
  for (let k = 0; k < A; k++) if (this.aEv[k] < 0) sums[g[k]] += this.blk[k];
  for (let m = 0; m < this.M; m++) {
    if (m > 0) {
      const x = this.ev[m - 1], k = x >>> 1;
      sums[g[k]] += x & 1 ? -this.blk[k] : this.blk[k];
    }
    if (m % C === 0) cp.set(sums, (m / C) * G);
  }
  this.cp = cp;
};

// The groups' allocated bytes at moment m, into out (Float64Array of G).
VZ.Run.prototype.groupsAt = function (m, out) {
  const G = this.groupNames.length, c = Math.floor(m / VZ.CP);
  for (let j = 0; j < G; j++) out[j] = this.cp[c * G + j];
  for (let i = c * VZ.CP; i < m; i++) {
    const x = this.ev[i], k = x >>> 1;
    out[this.group[k]] += x & 1 ? -this.blk[k] : this.blk[k];
  }
  return out;
};

// Whether allocation k is live at moment m.
VZ.Run.prototype.liveAt = function (k, m) { return this.aEv[k] < m && (this.fEv[k] < 0 || this.fEv[k] >= m); };

// Formatting: bytes in the unit named, and exactly.
VZ.unitFor = function (max) { return max >= VZ.GiB ? ['GiB', VZ.GiB] : max >= VZ.MiB ? ['MiB', VZ.MiB] : ['KiB', VZ.KiB]; };
VZ.fmt = function (bytes) {
  const [u, d] = VZ.unitFor(Math.abs(bytes));
  return (bytes / d).toFixed(bytes && Math.abs(bytes) < 10 * d ? 3 : 2) + ' ' + u;
};
VZ.exact = function (bytes) { return VZ.fmt(bytes) + ' (' + bytes.toLocaleString('en-US') + ' bytes)'; };
VZ.COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7',
  '#9c755f', '#bab0ac', '#86bcb6', '#d37295', '#8cd17d', '#a0cbe8'];
VZ.color = function (g) { return VZ.COLORS[g % VZ.COLORS.length]; };
