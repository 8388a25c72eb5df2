// A small canvas chart of training and validation loss, with guide lines and a hover readout.

const GUIDES = [
  { y: Math.log(256), label: 'random (ln 256)' },
  { y: 2.0, label: '2.0' },
  { y: 1.5, label: '1.5' },
];

const COLORS = {
  train: '#3b6fd8',
  trainRaw: 'rgba(59, 111, 216, 0.25)',
  val: '#e0731b',
  grid: '#e4e7ec',
  guide: '#9aa3b2',
  text: '#4a5263',
};

export class LossChart {
  // canvas: the element to draw on; opts.mini draws a small curve without axes or hover.
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.mini = !!opts.mini;
    this.points = [];
    this.total = 0;
    this.hover = null;
    if (!this.mini) {
      canvas.addEventListener('mousemove', (e) => this.onMove(e));
      canvas.addEventListener('mouseleave', () => { this.hover = null; this.draw(); });
      canvas.addEventListener('touchstart', (e) => this.onMove(e.touches[0]), { passive: true });
    }
    this.resizeObserver = new ResizeObserver(() => this.draw());
    this.resizeObserver.observe(canvas);
  }

  // destroy stops watching the canvas's size; the chart is not drawn again.
  destroy() {
    this.resizeObserver.disconnect();
  }

  // points: [{step, train, val}] (train or val may be null); total: the planned step count.
  setData(points, total) {
    this.points = points;
    this.total = total || 0;
    this.draw();
  }

  layout() {
    const rect = this.canvas.getBoundingClientRect();
    const w = Math.max(rect.width, 50), h = Math.max(rect.height, 30);
    const pad = this.mini ? { l: 2, r: 2, t: 4, b: 2 } : { l: 44, r: 12, t: 12, b: 28 };
    return { w, h, pad, pw: w - pad.l - pad.r, ph: h - pad.t - pad.b };
  }

  scales(L) {
    const pts = this.points;
    const maxStep = Math.max(this.total, pts.length ? pts[pts.length - 1].step : 1, 1);
    let lo = Infinity, hi = -Infinity;
    for (const p of pts) {
      for (const v of [p.train, p.val]) {
        if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
    }
    if (!isFinite(lo)) { lo = 1.0; hi = Math.log(256); }
    hi = Math.max(hi, Math.log(256) + 0.2);
    lo = Math.max(0, Math.min(lo, 1.5) - 0.2);
    const x = (s) => L.pad.l + (s / maxStep) * L.pw;
    const y = (v) => L.pad.t + (1 - (v - lo) / (hi - lo)) * L.ph;
    return { x, y, lo, hi, maxStep };
  }

  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const L = this.layout();
    if (c.width !== Math.round(L.w * dpr) || c.height !== Math.round(L.h * dpr)) {
      c.width = Math.round(L.w * dpr);
      c.height = Math.round(L.h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, L.w, L.h);
    const S = this.scales(L);
    g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1;
    if (!this.mini) this.drawAxes(g, L, S);
    // Guide lines.
    g.setLineDash([4, 4]);
    for (const gd of GUIDES) {
      if (gd.y < S.lo || gd.y > S.hi) continue;
      g.strokeStyle = COLORS.guide;
      g.beginPath(); g.moveTo(L.pad.l, S.y(gd.y)); g.lineTo(L.pad.l + L.pw, S.y(gd.y)); g.stroke();
      if (!this.mini) {
        g.fillStyle = COLORS.guide;
        g.textAlign = 'right';
        g.fillText(gd.label, L.pad.l + L.pw - 4, S.y(gd.y) - 4);
      }
    }
    g.setLineDash([]);
    const train = this.points.filter((p) => p.train != null);
    // Raw training loss, light; its moving average, strong.
    if (!this.mini) this.line(g, S, train.map((p) => [p.step, p.train]), COLORS.trainRaw, 1);
    this.line(g, S, smooth(train), COLORS.train, this.mini ? 1.5 : 2);
    const val = this.points.filter((p) => p.val != null).map((p) => [p.step, p.val]);
    this.line(g, S, val, COLORS.val, this.mini ? 1.5 : 2);
    if (!this.mini) {
      g.fillStyle = COLORS.val;
      for (const [s, v] of val) { g.beginPath(); g.arc(S.x(s), S.y(v), 2.5, 0, 2 * Math.PI); g.fill(); }
      this.drawHover(g, L, S);
    }
  }

  drawAxes(g, L, S) {
    g.strokeStyle = COLORS.grid;
    g.fillStyle = COLORS.text;
    g.textAlign = 'right';
    let step = (S.hi - S.lo) > 3 ? 1 : 0.5;
    // A loss far above the usual (a run that diverged, or an imported file's history) would
    // draw a line per unit, and past 2^53 loop for ever (v + 1 == v): widen the step instead.
    const lines = Math.max(2, Math.floor(L.ph / 24));
    if ((S.hi - S.lo) / step > lines) step = niceStep((S.hi - S.lo) / lines);
    for (let v = Math.ceil(S.lo / step) * step; v <= S.hi; v += step) {
      g.beginPath(); g.moveTo(L.pad.l, S.y(v)); g.lineTo(L.pad.l + L.pw, S.y(v)); g.stroke();
      g.fillText(v.toFixed(1), L.pad.l - 6, S.y(v) + 4);
    }
    const ticks = niceTicks(S.maxStep, Math.max(2, Math.floor(L.pw / 80)));
    for (const t of ticks) {
      // Centred under its step, but kept inside the canvas: the last one ends at its edge.
      const label = t.toLocaleString('en-US');
      const right = S.x(t) + g.measureText(label).width / 2 > L.w - 2;
      g.textAlign = right ? 'right' : 'center';
      g.fillText(label, right ? L.w - 2 : S.x(t), L.h - 10);
    }
    g.strokeStyle = COLORS.guide;
    g.strokeRect(L.pad.l, L.pad.t, L.pw, L.ph);
  }

  line(g, S, pts, color, width) {
    if (pts.length === 0) return;
    g.strokeStyle = color;
    g.lineWidth = width;
    g.beginPath();
    pts.forEach(([s, v], i) => (i ? g.lineTo(S.x(s), S.y(v)) : g.moveTo(S.x(s), S.y(v))));
    g.stroke();
    g.lineWidth = 1;
  }

  onMove(e) {
    const rect = this.canvas.getBoundingClientRect();
    this.hover = { x: e.clientX - rect.left, y: e.clientY - rect.top };
    this.draw();
  }

  // The readout: the nearest step's training loss and the nearest validation loss.
  drawHover(g, L, S) {
    if (!this.hover || this.points.length === 0) return;
    const step = ((this.hover.x - L.pad.l) / L.pw) * S.maxStep;
    let best = null, bestVal = null;
    for (const p of this.points) {
      if (p.train != null && (!best || Math.abs(p.step - step) < Math.abs(best.step - step))) best = p;
      if (p.val != null && (!bestVal || Math.abs(p.step - step) < Math.abs(bestVal.step - step))) bestVal = p;
    }
    if (!best) return;
    const x = S.x(best.step);
    g.strokeStyle = COLORS.text;
    g.setLineDash([2, 3]);
    g.beginPath(); g.moveTo(x, L.pad.t); g.lineTo(x, L.pad.t + L.ph); g.stroke();
    g.setLineDash([]);
    const lines = [`step ${best.step}`, `train ${best.train.toFixed(3)}`];
    if (bestVal) lines.push(`val ${bestVal.val.toFixed(3)} (step ${bestVal.step})`);
    const w = Math.max(...lines.map((s) => g.measureText(s).width)) + 12;
    const h = lines.length * 15 + 8;
    let bx = x + 8;
    if (bx + w > L.pad.l + L.pw) bx = x - 8 - w;
    const by = L.pad.t + 6;
    g.fillStyle = 'rgba(255,255,255,0.95)';
    g.strokeStyle = COLORS.guide;
    g.fillRect(bx, by, w, h); g.strokeRect(bx, by, w, h);
    g.fillStyle = COLORS.text;
    g.textAlign = 'left';
    lines.forEach((s, i) => g.fillText(s, bx + 6, by + 16 + i * 15));
  }
}

// smooth returns a centred moving average of the training loss, as [step, loss] pairs; being
// centred, it does not lag behind the raw curve.
function smooth(train) {
  const n = train.length;
  const w = Math.max(1, Math.floor(n / 80));
  const prefix = [0];
  for (const p of train) prefix.push(prefix[prefix.length - 1] + p.train);
  return train.map((p, i) => {
    const lo = Math.max(0, i - w), hi = Math.min(n, i + w + 1);
    return [p.step, (prefix[hi] - prefix[lo]) / (hi - lo)];
  });
}

// niceStep returns the smallest of 1, 2 and 5 times a power of ten that is at least raw (> 0).
function niceStep(raw) {
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
}

function niceTicks(max, n) {
  const step = niceStep(max / n);
  const out = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Math.round(t));
  return out;
}
