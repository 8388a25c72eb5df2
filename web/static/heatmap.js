// Attention heat maps: one square per head, rows are the reading position (query), columns the
// position read from (key). The selected position's row is outlined.

export function drawHeads(container, ins, pos) {
  container.replaceChildren();
  const T = ins.tokens.length;
  const cell = Math.max(3, Math.min(14, Math.floor(240 / T)));
  const size = cell * T;
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
    g.fillStyle = '#f3f4f6';
    g.fillRect(0, 0, size, size);
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
    cap.textContent = `head ${h + 1}`;
    const read = () => `head ${h + 1}`;
    cv.addEventListener('mousemove', (e) => {
      const r = cv.getBoundingClientRect();
      const k = Math.floor((e.clientX - r.left) / cell), q = Math.floor((e.clientY - r.top) / cell);
      if (q < 0 || q >= T || k < 0 || k > q) { cap.textContent = read(); return; }
      const p = rows[q][k];
      cap.textContent = `${ins.tokens[q]} (${q}) reads ${ins.tokens[k]} (${k}): ${(100 * p).toFixed(1)}%`;
    });
    cv.addEventListener('mouseleave', () => { cap.textContent = read(); });
    box.append(cv, cap);
    container.append(box);
  });
}
