// layout.js — the allocator at one moment: its segments (or runs of mapped pages) with the
// blocks live in them and the free holes between, so "reserved but not allocated" is visible.
//
// The mapped ranges at moment m come from a sweep over the run's signed segment ranges
// applied by then (segEv < m; -1 is before the first event): coverage above zero is mapped.
// The live blocks are the allocations live at m, sorted by address. The ranges are laid end to
// end in rows, one byte scale for all, so a range's width is its size. Segments or pages that
// touch are drawn as one contiguous range (in the pages model, a run of mapped pages is what
// the allocator itself calls a segment).
'use strict';
VZ.Layout = function (run, parent) {
  this.run = run;
  const box = document.createElement('div');
  box.className = 'layout';
  box.innerHTML = '<div class="sums"></div><canvas height="200"></canvas>';
  parent.appendChild(box);
  this.sums = box.querySelector('.sums');
  this.sums.id = 'layout-sums-' + run.index;
  this.canvas = box.querySelector('canvas');
  this.canvas.id = 'layout-' + run.index;
  this.items = [];
};

VZ.Layout.prototype.ranges = function (m) {
  const run = this.run, pts = [];
  for (let j = 0; j < run.segEv.length; j++) {
    if (run.segEv[j] >= m) continue;
    const a = run.segAddr[j], s = run.segSize[j], w = s > 0 ? 1 : -1;
    pts.push([a, w], [a + Math.abs(s), -w]);
  }
  pts.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const out = [];
  let cov = 0, start = 0;
  for (let i = 0; i < pts.length;) {
    const a = pts[i][0], before = cov;
    while (i < pts.length && pts[i][0] === a) cov += pts[i++][1];
    if (before <= 0 && cov > 0) start = a;
    else if (before > 0 && cov <= 0 && a > start) out.push([start, a]);
  }
  return out;
};

VZ.Layout.prototype.show = function (m) {
  const run = this.run, ranges = this.ranges(m), blocks = [];
  for (let k = 0; k < run.meta.nAllocs; k++) if (run.blk[k] > 0 && run.liveAt(k, m)) blocks.push(k);
  blocks.sort((x, y) => run.addr[x] - run.addr[y]);
  let reserved = 0, allocated = 0, free = 0, holes = 0, largest = 0;
  for (const [a, b] of ranges) reserved += b - a;
  for (const k of blocks) allocated += run.blk[k];
  // Holes: each range less the blocks inside it.
  const items = [];
  let bi = 0;
  for (const [a, b] of ranges) {
    let at = a;
    while (bi < blocks.length && run.addr[blocks[bi]] < b) {
      const k = blocks[bi++], s = run.addr[k];
      if (s > at) { items.push({ a: at, b: s, k: -1 }); free += s - at; holes++; largest = Math.max(largest, s - at); }
      items.push({ a: s, b: s + run.blk[k], k });
      at = Math.max(at, s + run.blk[k]);
    }
    if (b > at) { items.push({ a: at, b, k: -1 }); free += b - at; holes++; largest = Math.max(largest, b - at); }
    items.push({ gap: true });
  }
  this.m = m;
  this.items = items;
  this.ranges_ = ranges;
  const el = this.sums;
  el.dataset.moment = m;
  el.dataset.reserved = reserved;
  el.dataset.allocated = allocated;
  el.dataset.blocks = blocks.length;
  el.textContent = run.meta.name + ' at moment ' + m.toLocaleString('en-US') + ': reserved ' + VZ.exact(reserved) +
    ' in ' + ranges.length + ' contiguous range' + (ranges.length === 1 ? '' : 's') + ' = allocated ' + VZ.exact(allocated) + ' in ' +
    blocks.length.toLocaleString('en-US') + ' blocks + free ' + VZ.exact(free) + ' in ' + holes + ' holes (largest ' +
    VZ.fmt(largest) + ')' + (reserved - allocated - free ? ' — blocks outside the segments: ' + VZ.fmt(reserved - allocated - free) : '');
  this.draw();
};

VZ.Layout.prototype.draw = function () {
  const dpr = window.devicePixelRatio || 1, W = this.canvas.clientWidth || 1200, rows = 8, rowH = 22, H = rows * (rowH + 3);
  this.canvas.width = Math.round(W * dpr);
  this.canvas.height = Math.round(H * dpr);
  this.canvas.style.height = H + 'px';
  const ctx = this.canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  let total = 0, nr = 0;
  for (const it of this.items) if (!it.gap) total += it.b - it.a; else nr++;
  const usable = W * rows - nr * 3, scale = total ? usable / total : 0;
  let pos = 0;
  this.hit = [];
  const run = this.run;
  for (const it of this.items) {
    if (it.gap) { pos += 3; continue; }
    let w = Math.max((it.b - it.a) * scale, 0.5);
    while (w > 0) { // wrap across rows
      const row = Math.floor(pos / W), x = pos - row * W, piece = Math.min(w, W - x);
      if (row >= rows) break;
      const y = row * (rowH + 3);
      ctx.fillStyle = it.k < 0 ? '#e5e7eb' : VZ.color(run.group[it.k]);
      ctx.fillRect(x, y, Math.max(piece, 0.5), rowH);
      if (it.k >= 0 && piece > 2) { ctx.fillStyle = 'rgba(255,255,255,0.6)'; ctx.fillRect(x + piece - 0.5, y, 0.5, rowH); }
      this.hit.push([x, y, piece, rowH, it]);
      pos += piece;
      w -= piece;
    }
  }
};

VZ.Layout.prototype.itemAt = function (x, y) {
  for (const [hx, hy, hw, hh, it] of this.hit || []) if (x >= hx && x < hx + Math.max(hw, 1) && y >= hy && y < hy + hh) return it;
  return null;
};

// Details of allocation k: sizes, category, stream, stack and lifetime.
VZ.describeAlloc = function (run, k) {
  const a = run.aEv[k], f = run.fEv[k];
  const life = (a < 0 ? 'allocated before the first event' : 'allocated at event ' + a.toLocaleString('en-US')) + ', ' +
    (f < 0 ? 'never freed (live at the end)' : 'freed at event ' + f.toLocaleString('en-US')) +
    (a >= 0 && f >= 0 ? ': lived ' + (f - a).toLocaleString('en-US') + ' events' +
      (run.hasTime ? ', ' + ((run.time[f] - run.time[a]) / 1e3).toFixed(3) + ' ms' : '') : '');
  return 'allocation #' + k + '\n  block      ' + VZ.exact(run.blk[k]) + '\n  requested  ' + VZ.exact(run.req[k]) +
    '\n  address    0x' + run.addr[k].toString(16) + '\n  category   ' + run.meta.tags[run.tag[k]] +
    '\n  stream     ' + run.stream[k] + '\n  lifetime   ' + life + '\n  stack      ' +
    (run.stack[k] >= 0 ? run.meta.stacks[run.stack[k]].split('\n').join('\n             ') : '(none recorded)');
};
