// compare.js — two inputs or more against the first: their totals, and which categories and
// stacks grew, at each one's peak of allocated memory and at its end (e.g. native against
// vram, or step 10 against step 100 of a leak). Stacks are matched by their text.
'use strict';
VZ.compare = function (runs, el) {
  const row = (label, vals, fmt) => '<tr><td>' + VZ.esc(label) + '</td>' + vals.map((v, i) => {
    const d = i ? v - vals[0] : 0, cls = d > 0 ? 'grew' : d < 0 ? 'shrank' : '';
    return '<td>' + fmt(v) + (i ? ' <span class="' + cls + '">(' + (d >= 0 ? '+' : '−') + fmt(Math.abs(d)) + ')</span>' : '') + '</td>';
  }).join('') + '</tr>';
  const head = '<tr><th></th>' + runs.map((r) => '<th>' + VZ.esc(r.meta.name) + '</th>').join('') + '</tr>';
  let html = '<table class="cmp" id="cmp-totals">' + head;
  html += row('peak allocated', runs.map((r) => r.alloc[r.peakAllocMoment]), VZ.fmt);
  html += row('peak reserved', runs.map((r) => r.reserved[r.peakResMoment]), VZ.fmt);
  html += row('allocated at the end', runs.map((r) => r.alloc[r.M - 1]), VZ.fmt);
  html += row('reserved at the end', runs.map((r) => r.reserved[r.M - 1]), VZ.fmt);
  html += row('events', runs.map((r) => r.N), (v) => v.toLocaleString('en-US'));
  html += '</table>';
  for (const [title, key] of [['by category', (r, k) => r.meta.tags[r.tag[k]]],
    ['by stack (top frame)', (r, k) => r.topFrame(r.stack[k]) || '(no stack)']]) {
    for (const [when, at] of [['at the peak of allocated memory', (r) => r.peakAllocMoment], ['at the end', (r) => r.M - 1]]) {
      const sums = runs.map((r) => {
        const m = at(r), s = new Map();
        for (let k = 0; k < r.meta.nAllocs; k++) if (r.liveAt(k, m)) s.set(key(r, k), (s.get(key(r, k)) || 0) + r.blk[k]);
        return s;
      });
      const names = new Set();
      for (const s of sums) for (const n of s.keys()) names.add(n);
      const list = [...names].map((n) => [n, sums.map((s) => s.get(n) || 0)]);
      list.sort((x, y) => Math.abs(y[1][y[1].length - 1] - y[1][0]) - Math.abs(x[1][x[1].length - 1] - x[1][0]));
      html += '<div>Allocated ' + title + ', ' + when + ' (largest changes first):</div><table class="cmp">' + head +
        list.slice(0, 15).map(([n, v]) => row(n, v, VZ.fmt)).join('') + '</table>';
    }
  }
  el.innerHTML = html;
};
