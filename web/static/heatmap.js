// Attention heat maps: one square per head returned (every head, or the one asked for), rows are the reading position (query), columns the
// position read from (key). The selected position's row is outlined; short texts get their
// bytes written along the edges.

export function drawHeads(container, ins, pos) {
  container.replaceChildren();
  const T = ins.tokens.length;
  const cell = Math.max(3, Math.min(14, Math.floor(240 / T)));
  const labels = cell >= 10;
  const margin = labels ? 16 : 0;
  const size = cell * T + margin;
  ins.attention.forEach((rows, h) => {
    const box = document.createElement('figure');
    box.className = 'head';
    const cv = document.createElement('canvas');
    const dpr = window.devicePixelRatio || 1;
    cv.width = size * dpr;
    cv.height = size * dpr;
    cv.style.width = size + 'px';
    cv.style.height = size + 'px';
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (labels) {
      g.fillStyle = '#4a5263';
      g.font = `${Math.min(11, cell)}px ui-monospace, monospace`;
      g.textAlign = 'center';
      g.textBaseline = 'middle';
      ins.tokens.forEach((t, i) => {
        const s = t.length > 1 ? '·' : t; // \xNN bytes do not fit a cell
        g.fillText(s, margin + i * cell + cell / 2, margin / 2);
        g.fillText(s, margin / 2, margin + i * cell + cell / 2);
      });
    }
    g.translate(margin, margin);
    g.fillStyle = '#f3f4f6';
    g.fillRect(0, 0, cell * T, cell * T);
    rows.forEach((row, q) => {
      row.forEach((p, k) => {
        // Light to dark blue with the square root of the weight, so small weights still show.
        const a = Math.sqrt(p);
        g.fillStyle = `rgb(${Math.round(255 - a * 225)}, ${Math.round(255 - a * 170)}, ${Math.round(255 - a * 60)})`;
        g.fillRect(k * cell, q * cell, cell, cell);
      });
    });
    if (pos != null) {
      g.strokeStyle = '#e0731b';
      g.lineWidth = 1.5;
      g.strokeRect(0.75, pos * cell + 0.75, (pos + 1) * cell - 1.5, cell - 1.5);
    }
    const cap = document.createElement('figcaption');
    const title = `head ${(ins.head >= 0 ? ins.head : h) + 1}`;
    cap.textContent = title;
    cv.addEventListener('mousemove', (e) => {
      const r = cv.getBoundingClientRect();
      const k = Math.floor((e.clientX - r.left - margin) / cell), q = Math.floor((e.clientY - r.top - margin) / cell);
      if (q < 0 || q >= T || k < 0 || k > q) { cap.textContent = title; return; }
      cap.textContent = `${title}: ${ins.tokens[q]} (${q}) reads ${ins.tokens[k]} (${k}): ${(100 * rows[q][k]).toFixed(1)}%`;
    });
    cv.addEventListener('mouseleave', () => { cap.textContent = title; });
    box.append(cv, cap);
    container.append(box);
  });
}
