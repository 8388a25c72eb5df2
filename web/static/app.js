// The TinyGPT playground. It talks to the server only through its JSON API (see the README).
import { LossChart } from './chart.js';
import { drawHeads } from './heatmap.js';

// The access token comes in the address that tinygpt serve prints, after # (#token=...), which
// the browser never sends to a server. The page keeps it in this tab's session storage (its
// origin's alone, port included) and takes it out of the address bar and the history, so that
// it does not stay on screen or in the browser's history. (?token= in the query, from older
// addresses, is taken the same way.)
const TOKEN = (() => {
  const key = 'tinygpt-token';
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('token');
  const fromQuery = new URLSearchParams(location.search).get('token');
  const t = fromHash || fromQuery;
  if (t) {
    sessionStorage.setItem(key, t);
    history.replaceState(null, '', location.pathname);
    return t;
  }
  return sessionStorage.getItem(key) || '';
})();
const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ helpers

async function api(method, path, body, opts = {}) {
  const headers = { 'X-TinyGPT-Token': TOKEN };
  let payload = body;
  if (body !== undefined && !(body instanceof FormData) && !(body instanceof Blob) && !(body instanceof ArrayBuffer)) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: payload, signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new Error('Cannot reach the server: is tinygpt serve still running?');
  }
  if (opts.raw) return resp;
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    let msg = (data && data.error) || `${resp.status} ${resp.statusText}`;
    if (resp.status === 401) msg += ' (open the address that tinygpt serve printed, which ends in #token=...)';
    throw new Error(msg);
  }
  return data;
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// printable replaces control characters other than newline and tab, which a model that is still
// learning produces, with a visible dot.
const printable = (s) => s.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, '·');

const fmtInt = (n) => (n == null ? '–' : Math.round(n).toLocaleString('en-US'));
const fmtLoss = (v) => (v == null ? '–' : v.toFixed(3));
function fmtBytes(n) {
  if (n == null) return '–';
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KB';
  return n + ' bytes';
}
function fmtTime(s) {
  if (s == null || !isFinite(s)) return '–';
  s = Math.round(s);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + String(s % 60).padStart(2, '0') + ' s';
  return Math.floor(s / 3600) + ' h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + ' min';
}

// meaning says in plain words what a loss (nats per byte) means.
function meaning(loss) {
  if (loss == null) return '';
  const ppl = Math.exp(loss);
  let words;
  // Random guessing is ln 256 ≈ 5.55; knowing only how common each character is gives about
  // 3 on English text.
  if (loss > 5.2) words = 'random guessing: every one of the 256 bytes looks equally likely';
  else if (loss > 4.5) words = 'still close to random guessing';
  else if (loss > 3.3) words = 'it is finding out which bytes occur at all: letters and spaces, not yet how often';
  else if (loss > 2.7) words = 'it has learned which characters are common';
  else if (loss > 2.2) words = 'it knows common letter pairs and where spaces go';
  else if (loss > 1.8) words = 'syllables and short words are forming';
  else if (loss > 1.5) words = 'it writes mostly real words, with some grammar';
  else if (loss > 1.0) words = 'fluent phrases; on a small corpus it is starting to memorise';
  else words = 'very sure of itself: with a small corpus, it is reciting the training text';
  return `Loss ${loss.toFixed(2)}: ${words}. Perplexity ${ppl.toFixed(1)}: as unsure as choosing among ${ppl.toFixed(1)} bytes.`;
}

let toastTimer = null;
// toast shows msg for a few seconds, or until the next one where sticky.
function toast(msg, kind = 'info', sticky = false) {
  const t = $('toast');
  t.textContent = msg;
  t.className = 'toast ' + kind;
  clearTimeout(toastTimer);
  if (!sticky) toastTimer = setTimeout(() => t.classList.add('hidden'), kind === 'error' ? 8000 : 4000);
}

// ------------------------------------------------------------------ state

const state = {
  system: null,
  presets: null,
  job: null, // JobState from the server
  points: [], // loss history of the job's run
  runs: [],
  selected: null, // run id chosen for Generate / Inspect
  genAbort: null,
  corpusBytes: 0,
  corpusLimit: 32 << 20,
  showSetupAfterRun: false, // the user asked for the setup form below a finished run
  lost: false, // the event stream to the server is broken (the page says so once)
};

let liveChart;

// ------------------------------------------------------------------ tabs

function showTab(name) {
  if (!document.getElementById('tab-' + name)) name = 'train';
  for (const s of document.querySelectorAll('.tab')) s.classList.toggle('hidden', s.id !== 'tab-' + name);
  for (const a of document.querySelectorAll('#tabs a')) {
    a.classList.toggle('active', a.dataset.tab === name);
    if (a.dataset.tab === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (name === 'models') loadRuns();
  if (name === 'generate' || name === 'inspect') loadRuns();
  if (name === 'train' && liveChart) liveChart.draw();
}
window.addEventListener('hashchange', () => showTab(location.hash.slice(1)));

// ------------------------------------------------------------------ setup form

function settings() {
  const preset = $('preset').value;
  const s = {
    name: $('run-name').value.trim(),
    preset,
    steps: +$('steps').value || 0,
    batch: +$('batch').value || 0,
    lr: +$('lr').value || 0,
    schedule: $('schedule').value,
    warmup: +$('warmup').value || 0,
    dropout: +$('dropout').value || 0,
    seed: $('seed').value === '' ? null : +$('seed').value,
    backend: document.querySelector('input[name="backend"]:checked')?.value || 'auto',
  };
  if (preset === 'custom') {
    s.layers = +$('layers').value || 0;
    s.d_model = +$('d_model').value || 0;
    s.heads = +$('heads').value || 0;
    s.ctx = +$('ctx').value || 0;
  }
  const kind = corpusKind();
  s.corpus = kind === 'builtin' ? 'builtin' : 'text';
  s.corpus_bytes = state.corpusBytes;
  if (kind === 'upload' && $('corpus-file').files[0]) s.corpus_name = $('corpus-file').files[0].name;
  if (kind === 'paste') s.corpus_name = 'pasted text';
  return s;
}

const corpusKind = () => document.querySelector('input[name="corpus"]:checked').value;

function fillPresets() {
  const sel = $('preset');
  sel.replaceChildren();
  for (const p of state.presets.presets) {
    const est = p.estimate.seconds ? ` · about ${fmtTime(p.estimate.seconds)} here` : '';
    sel.append(el('option', { value: p.name, text: `${p.name} — ${fmtInt(p.estimate.params)} parameters${est}` }));
  }
  sel.append(el('option', { value: 'custom', text: 'custom sizes…' }));
  sel.value = 'tiny';
  presetChanged();
}

function presetChanged() {
  const name = $('preset').value;
  $('custom-sizes').classList.toggle('hidden', name !== 'custom');
  const p = state.presets.presets.find((x) => x.name === name);
  if (p) {
    $('steps').value = p.steps;
    $('batch').value = p.batch;
    const c = p.config;
    $('preset-info').textContent = `${c.layers} layers, d_model ${c.d_model}, ${c.heads} heads, context ${c.ctx} bytes; ` +
      `${p.steps} steps of batch ${p.batch} by default.`;
    $('layers').value = c.layers; $('d_model').value = c.d_model; $('ctx').value = c.ctx; $('heads').value = 0;
  } else {
    $('preset-info').textContent = 'Choose the shape yourself. heads 0 picks about 32 dimensions per head.';
  }
  schedulePlan();
}

async function corpusChanged() {
  const kind = corpusKind();
  $('corpus-text').classList.toggle('hidden', kind !== 'paste');
  $('corpus-file').classList.toggle('hidden', kind !== 'upload');
  let n = 0, msg = '';
  if (kind === 'builtin') {
    n = state.presets.builtin_corpus_bytes;
    msg = `The built-in corpus: ${fmtBytes(n)} of generated stories, letters, recipes, rhymes and plays.`;
  } else if (kind === 'paste') {
    n = new TextEncoder().encode($('corpus-text').value).length;
    msg = `${fmtInt(n)} bytes pasted.`;
  } else {
    const f = $('corpus-file').files[0];
    n = f ? f.size : 0;
    msg = f ? `${f.name}: ${fmtInt(n)} bytes.` : 'Choose a plain-text file.';
  }
  if (n > state.corpusLimit) msg += ` That is more than the limit of ${fmtBytes(state.corpusLimit)}: use a smaller text, or the command line (tinygpt train --data FILE) for big corpora.`;
  state.corpusBytes = n;
  const info = $('corpus-info');
  info.textContent = msg;
  info.classList.toggle('error', n > state.corpusLimit);
  schedulePlan();
}

let planTimer = null;
let planSeq = 0; // replies to older plan requests are dropped
function schedulePlan() {
  clearTimeout(planTimer);
  planTimer = setTimeout(plan, 250);
}

async function plan() {
  const box = $('plan'), warn = $('warnings');
  const seq = ++planSeq;
  try {
    const p = await api('POST', '/api/plan', settings());
    if (seq !== planSeq) return;
    box.replaceChildren(
      stat('parameters', fmtInt(p.params)),
      stat('estimated time', p.seconds ? fmtTime(p.seconds) : '–', p.calibration),
      stat('per step', p.ms_per_step ? p.ms_per_step.toFixed(1) + ' ms' : '–'),
      stat('memory', fmtBytes(p.memory_bytes)),
      stat('corpus', fmtBytes(p.corpus_bytes)),
      stat('bytes per parameter', p.params ? (p.corpus_bytes * 0.9 / p.params).toFixed(2) : '–'),
    );
    warn.replaceChildren(...p.warnings.map((w) => el('p', { class: 'warning', text: w })));
    if (state.corpusBytes > state.corpusLimit) warn.append(el('p', { class: 'error', text: $('corpus-info').textContent }));
  } catch (e) {
    if (seq !== planSeq) return;
    box.replaceChildren();
    warn.replaceChildren(el('p', { class: 'error', text: e.message }));
  }
}

function stat(label, value, title) {
  return el('div', { class: 'stat', title }, el('div', { class: 'stat-value', text: value }), el('div', { class: 'stat-label', text: label }));
}

async function startRun(ev) {
  ev.preventDefault();
  const s = settings();
  const kind = corpusKind();
  const btn = $('btn-start');
  if (state.corpusBytes > state.corpusLimit) { toast($('corpus-info').textContent, 'error'); return; }
  btn.disabled = true;
  try {
    let res;
    if (kind === 'builtin') {
      res = await api('POST', '/api/runs', s);
    } else {
      const fd = new FormData();
      fd.append('settings', JSON.stringify(s));
      if (kind === 'paste') fd.append('corpus', new Blob([$('corpus-text').value], { type: 'text/plain' }), 'pasted.txt');
      else {
        const f = $('corpus-file').files[0];
        if (!f) throw new Error('Choose a .txt file to upload, or pick another corpus.');
        fd.append('corpus', f, 'corpus.txt');
      }
      res = await api('POST', '/api/runs', fd);
    }
    for (const w of res.warnings || []) toast(w, 'warn');
    state.selected = res.run.id;
    state.showSetupAfterRun = false;
    await refreshJob();
    showLive();
  } catch (e) {
    toast(e.message, 'error');
  } finally {
    btn.disabled = false;
  }
}

// ------------------------------------------------------------------ live training view

// setJob shows job state js and reports whether it did: a state of the shown run older than
// the one shown (a smaller seq: it arrived late, over another connection) is ignored.
function setJob(js) {
  const cur = state.job;
  if (cur && cur.run && js.run && cur.run.id === js.run.id && (js.seq || 0) < (cur.seq || 0)) return false;
  state.job = js;
  state.points = js.run ? (js.run.history || []).slice() : [];
  renderLive();
  return true;
}

function renderLive() {
  const js = state.job;
  const live = $('live');
  if (!js || !js.run) {
    live.classList.add('hidden');
    $('setup').classList.remove('hidden');
    return;
  }
  live.classList.remove('hidden');
  const r = js.run, st = js.stats;
  const active = js.active;
  // (classList.toggle's second argument must be a boolean: undefined flips the class instead.)
  $('setup').classList.toggle('hidden', Boolean(active || !state.showSetupAfterRun));
  $('live-name').textContent = r.name;
  const c = r.config;
  $('live-desc').textContent = `${fmtInt(r.params)} parameters · ${c.layers} layers, d_model ${c.d_model}, ${c.heads} heads, ctx ${c.ctx} · batch ${r.batch}, lr ${r.lr} ${r.schedule || ''} · ${r.corpus.source} (${fmtBytes(r.corpus.bytes)}) · ${r.backend}`;
  const status = js.state || r.status;
  const badge = $('live-status');
  badge.textContent = status;
  badge.className = 'badge ' + status;
  const pct = st.steps ? (100 * st.step) / st.steps : 0;
  $('live-bar').style.width = pct.toFixed(1) + '%';
  $('live-steps').textContent = `step ${fmtInt(st.step)} / ${fmtInt(st.steps)} (${pct.toFixed(0)}%)`;
  $('live-eta').textContent = active ? (status === 'paused' ? 'paused' : `about ${fmtTime(st.eta_s)} left`) : '';
  const gap = st.loss != null && st.val != null ? st.val - st.loss : null;
  $('live-stats').replaceChildren(
    stat('training loss', fmtLoss(st.loss)),
    stat('validation loss', fmtLoss(st.val)),
    stat('best validation', st.best_val != null ? `${fmtLoss(st.best_val)} @ ${st.best_step}` : '–'),
    stat('train–val gap', gap == null ? '–' : (gap >= 0 ? '+' : '') + gap.toFixed(3), 'validation minus training loss: a growing gap means the model memorises its training text'),
    stat('perplexity', st.loss != null ? Math.exp(st.loss).toFixed(2) : '–'),
    stat('elapsed', fmtTime(st.elapsed_s)),
    stat('ETA', active && status !== 'paused' ? fmtTime(st.eta_s) : '–'),
    stat('tokens/s', st.tokens_per_s ? fmtInt(st.tokens_per_s) : '–'),
    stat('ms/step', st.ms_per_step ? st.ms_per_step.toFixed(1) : '–'),
    stat('learning rate', st.lr ? st.lr.toExponential(2) : '–'),
  );
  $('live-meaning').textContent = meaning(st.loss);
  $('btn-pause').classList.toggle('hidden', !active || status === 'paused');
  $('btn-resume').classList.toggle('hidden', !active || status !== 'paused');
  $('btn-stop').classList.toggle('hidden', !active);
  const box = $('continue-box'), canContinue = Boolean(!active && r.resumable);
  if (canContinue && box.classList.contains('hidden')) {
    // A run stopped before its end continues by default to the end it was planned for.
    $('continue-steps').value = r.step < r.steps ? r.steps - r.step : 200;
  }
  box.classList.toggle('hidden', !canContinue);
  $('btn-new-run').classList.toggle('hidden', Boolean(active || state.showSetupAfterRun));
  $('btn-sample-live').classList.toggle('hidden', false);
  const err = $('live-error');
  err.textContent = r.error || '';
  err.classList.toggle('hidden', !r.error);
  renderSamples(js.samples || []);
  liveChart.setData(state.points, st.steps);
}

function renderSamples(samples) {
  const box = $('live-samples');
  if (!samples.length) {
    // A new run has none yet: not the last run's.
    box.replaceChildren(el('p', { class: 'muted', text: 'A sample is written every few hundred steps (more often in short runs).' }));
    return;
  }
  box.replaceChildren(...samples.slice().reverse().slice(0, 8).map((s) =>
    el('div', { class: 'sample' }, el('div', { class: 'sample-step', text: `step ${fmtInt(s.step)}` }), el('pre', { text: printable(s.text) }))));
}

function onProgress(ev) {
  const js = state.job;
  if (!js || !js.run || js.run.id !== ev.id) return refreshJob();
  const last = state.points.length ? state.points[state.points.length - 1].step : 0;
  for (const p of ev.points) if (p.step > last) state.points.push(p);
  capPoints();
  js.stats = ev.stats;
  throttledRender();
}

// capPoints keeps the live curve to a few thousand points: past that, every other one goes (the
// first and last stay), as the server thins the history it sends.
function capPoints() {
  const pts = state.points;
  if (pts.length <= 4000) return;
  state.points = pts.filter((p, i) => i % 2 === 0 || i === pts.length - 1);
}

function onEval(ev) {
  const js = state.job;
  if (!js || !js.run || js.run.id !== ev.id) return;
  const p = state.points.find((x) => x.step === ev.step);
  if (p) p.val = ev.val;
  else state.points.push({ step: ev.step, train: null, val: ev.val });
  js.stats = ev.stats;
  throttledRender();
}

function onSample(ev) {
  const js = state.job;
  if (!js || !js.run || js.run.id !== ev.id) return;
  js.samples = (js.samples || []).concat([{ step: ev.step, text: ev.text }]);
  throttledRender();
}

let renderPending = false;
function throttledRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => {
    renderPending = false;
    if (state.job) state.job.run.history = state.points;
    renderLive();
  });
}

async function refreshJob() {
  try { setJob(await api('GET', '/api/job')); } catch (e) { toast(e.message, 'error'); }
}

async function jobAction(action) {
  try {
    setJob(await api('POST', '/api/job/' + action));
    if (action === 'stop') toast('Stopped; the checkpoint is saved.');
    // The button pressed is hidden now: keyboard focus goes to the one that took its place.
    const next = { pause: 'btn-resume', resume: 'btn-pause' }[action];
    if (next && !$(next).classList.contains('hidden')) $(next).focus();
    else $('live-name').focus();
  } catch (e) {
    toast(e.message, 'error');
  }
}

// showLive scrolls the live view of the run into sight and gives it the keyboard focus (the
// controls that started it are gone).
function showLive() {
  $('live').scrollIntoView({ block: 'start' });
  $('live-name').focus({ preventScroll: true });
}

async function continueRun(id, steps) {
  try {
    const js = await api('POST', `/api/runs/${id}/continue`, { steps });
    state.showSetupAfterRun = false;
    setJob(js);
    location.hash = '#train';
    showLive();
  } catch (e) {
    toast(e.message, 'error');
  }
}

// ------------------------------------------------------------------ events

let events = null;
function connect() {
  if (events) events.close();
  events = new EventSource('/api/events?token=' + encodeURIComponent(TOKEN));
  const conn = $('conn');
  events.onopen = () => {
    conn.className = 'conn ok';
    conn.title = 'connected';
    conn.setAttribute('aria-label', conn.title);
    if (state.lost) { state.lost = false; toast('Connected to the server again.'); refreshJob(); }
  };
  events.onerror = () => {
    conn.className = 'conn down';
    conn.title = 'reconnecting to the server…';
    conn.setAttribute('aria-label', conn.title);
    if (!state.lost) {
      state.lost = true;
      toast('Lost the connection to tinygpt serve; reconnecting… (what the page shows may be out of date)', 'error', true);
    }
  };
  events.addEventListener('state', (e) => {
    const js = JSON.parse(e.data);
    const wasActive = state.job && state.job.active;
    const prevId = state.job && state.job.run ? state.job.run.id : null;
    if (!setJob(js)) return;
    if (wasActive && !js.active) { loadRuns(); toast(`Training ${js.state}: ${js.run.name}`); }
    // A run that starts training becomes the model to sample from only if the user has not
    // chosen one; later state events (pause, resume, checkpoints) leave the choice alone.
    if (js.active && (!wasActive || prevId !== js.run.id)) {
      if (!state.selected) state.selected = js.run.id;
      loadRuns();
    }
  });
  events.addEventListener('progress', (e) => onProgress(JSON.parse(e.data)));
  events.addEventListener('eval', (e) => onEval(JSON.parse(e.data)));
  events.addEventListener('sample', (e) => onSample(JSON.parse(e.data)));
  events.addEventListener('warning', (e) => toast(JSON.parse(e.data).text, 'error'));
}

// ------------------------------------------------------------------ models

async function loadRuns() {
  try {
    const list = await api('GET', '/api/runs');
    state.runs = list.runs;
    renderRuns();
    fillModelSelects();
  } catch (e) {
    toast(e.message, 'error');
  }
}

function fillModelSelects() {
  for (const sel of document.querySelectorAll('.model-select')) {
    const keep = state.selected || sel.value;
    sel.replaceChildren();
    for (const r of state.runs) {
      const live = state.job && state.job.active && state.job.run.id === r.id;
      sel.append(el('option', { value: r.id, text: `${r.name} — step ${fmtInt(r.step)}${live ? ' (training: latest weights)' : ''}` }));
    }
    if (!state.runs.length) sel.append(el('option', { value: '', text: '(no models yet: train or upload one)' }));
    if (keep && state.runs.some((r) => r.id === keep)) sel.value = keep;
  }
  fillLayers();
}

let miniCharts = []; // the cards' charts, disconnected when the cards are redrawn

function renderRuns() {
  for (const c of miniCharts) c.destroy();
  miniCharts = [];
  const box = $('model-list');
  if (!state.runs.length) {
    box.replaceChildren(el('p', { class: 'muted', text: 'No models yet. Train one, or upload a .tinygpt file.' }));
    return;
  }
  box.replaceChildren(...state.runs.map(runCard));
  for (const r of state.runs) {
    const cv = document.querySelector(`canvas[data-run="${r.id}"]`);
    if (!cv) continue;
    const chart = new LossChart(cv, { mini: true });
    chart.setData(r.history || [], r.steps);
    miniCharts.push(chart);
  }
}

// download starts a download of run id's model in format fmt. Its link carries a ticket for that
// download alone, not the token: the browser keeps every download's address in its history.
async function download(id, fmt) {
  try {
    const { ticket } = await api('POST', `/api/runs/${id}/ticket`);
    const a = el('a', { href: `/api/runs/${id}/download?format=${fmt}&ticket=${ticket}`, download: '' });
    document.body.append(a);
    a.click();
    a.remove();
  } catch (err) {
    toast(`Download failed: ${err.message}`, 'error');
  }
}

function runCard(r) {
  const live = state.job && state.job.active && state.job.run.id === r.id;
  const dl = (fmt, label) => el('a', { class: 'button-like small', href: '#', text: label, 'aria-label': `Download ${r.name} (${fmt === 'full' ? 'full checkpoint' : fmt})`, onclick: (e) => { e.preventDefault(); download(r.id, fmt); } });
  const c = r.config;
  const best = r.best_val ? `best val ${r.best_val.loss.toFixed(3)} @ ${r.best_val.step}` : 'no validation yet';
  const stepsInput = el('input', { type: 'number', min: '1', value: '200', class: 'small-input', 'aria-label': 'more steps' });
  return el('div', { class: 'model-card', 'data-id': r.id },
    el('div', { class: 'model-head' },
      el('div', {}, el('h3', { text: r.name }), el('div', { class: 'muted', text: `${fmtInt(r.params)} parameters · ${c.layers}L d${c.d_model} ${c.heads}h ctx${c.ctx} · ${r.dtype} · ${fmtBytes(r.file_bytes)}` })),
      el('span', { class: 'badge ' + (live ? 'training' : r.status), text: live ? 'training' : r.status })),
    el('canvas', { class: 'mini-chart', 'data-run': r.id }),
    el('div', { class: 'muted', text: `step ${fmtInt(r.step)} of ${fmtInt(r.steps)} · ${best} · ${r.corpus.source} (${fmtBytes(r.corpus.bytes)}) · ${new Date(r.created).toLocaleString()}` }),
    r.error ? el('div', { class: 'muted', text: r.error }) : null,
    r.sample ? el('details', { class: 'run-sample' }, el('summary', { text: 'latest sample' }), el('pre', { text: printable(r.sample) })) : null,
    el('div', { class: 'controls' },
      el('button', { class: 'primary small', text: 'Sample', 'aria-label': `Sample from ${r.name}`, onclick: () => { state.selected = r.id; fillModelSelects(); location.hash = '#generate'; } }),
      el('button', { class: 'small', text: 'Look inside', 'aria-label': `Look inside ${r.name}`, onclick: () => { state.selected = r.id; fillModelSelects(); location.hash = '#inspect'; } }),
      el('span', { class: 'downloads' }, dl('full', 'Download'), dl('fp16', 'fp16'), dl('int4', 'int4')),
      r.resumable && !live ? el('span', { class: 'inline', title: 'train this many more steps' }, '+', stepsInput, el('button', { class: 'small', text: 'Continue training', 'aria-label': `Continue training ${r.name}`, onclick: () => continueRun(r.id, +stepsInput.value) })) : null,
      live ? null : el('button', { class: 'danger small', text: 'Delete', 'aria-label': `Delete ${r.name}`, onclick: () => deleteRun(r) }),
    ));
}

async function deleteRun(r) {
  if (!confirm(`Delete "${r.name}" and its checkpoint? This cannot be undone.`)) return;
  try {
    await api('DELETE', '/api/runs/' + r.id);
    toast(`Deleted ${r.name}`);
    if (state.job && state.job.run && state.job.run.id === r.id) setJob({ active: false, stats: {}, samples: [] });
    loadRuns();
  } catch (e) {
    toast(e.message, 'error');
  }
}

async function uploadModel() {
  const f = $('upload-model').files[0];
  if (!f) return;
  if (state.system && f.size > state.system.limits.model_bytes) {
    toast(`${f.name} is larger than the upload limit of ${fmtBytes(state.system.limits.model_bytes)}.`, 'error');
    return;
  }
  try {
    const r = await api('POST', '/api/runs/import?name=' + encodeURIComponent(f.name), f);
    toast(`Added ${r.name}`);
    state.selected = r.id;
    loadRuns();
  } catch (e) {
    toast(e.message, 'error');
  } finally {
    $('upload-model').value = '';
  }
}

// ------------------------------------------------------------------ generate

async function generate() {
  const id = $('gen-model').value;
  if (!id) { toast('Train or upload a model first.', 'error'); return; }
  // Out-of-range settings are said, not sent (the server would use its own values silently).
  for (const id of ['gen-temp', 'gen-topk', 'gen-topp', 'gen-len', 'gen-seed']) {
    const inp = $(id);
    const v = inp.validity; // (not its step: a temperature of 0.73 is fine)
    if (v.badInput || v.rangeUnderflow || v.rangeOverflow || (id !== 'gen-seed' && inp.value === '')) {
      const name = inp.closest('label').firstChild.textContent.trim();
      toast(`${name}: ${inp.validationMessage || 'give a number'}`, 'error');
      inp.focus();
      return;
    }
  }
  const out = $('gen-out');
  const prompt = $('gen-prompt').value;
  out.replaceChildren(el('span', { class: 'prompt', text: prompt }));
  const gen = document.createTextNode('');
  out.append(gen);
  const body = {
    prompt, tokens: +$('gen-len').value || 0,
    temperature: +$('gen-temp').value, top_k: +$('gen-topk').value, top_p: +$('gen-topp').value,
  };
  if ($('gen-seed').value !== '') body.seed = +$('gen-seed').value;
  const ctl = new AbortController();
  state.genAbort = ctl;
  $('btn-gen').disabled = true;
  $('btn-gen-stop').disabled = false;
  $('gen-stats').textContent = 'loading the model…';
  const start = performance.now();
  let n = 0, first = null;
  try {
    const resp = await api('POST', `/api/runs/${id}/generate`, body, { raw: true, signal: ctl.signal });
    if (!resp.ok) {
      const e = await resp.json().catch(() => ({}));
      throw new Error(e.error || resp.statusText);
    }
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (!line) continue;
        const m = JSON.parse(line);
        if (m.text != null) {
          if (first == null) first = performance.now() - start;
          gen.appendData(printable(m.text));
          n += 1;
          $('gen-stats').textContent = `${fmtInt(n)} tokens · first after ${first.toFixed(0)} ms`;
        } else if (m.done) {
          $('gen-stats').textContent = `${fmtInt(m.tokens)} tokens at ${fmtInt(m.tokens_per_s)} tokens/s · first token after ${m.first_token_ms.toFixed(0)} ms · weights of step ${fmtInt(m.step)}${m.stopped ? ' · stopped' : ''}`;
        } else if (m.error) {
          throw new Error(m.error);
        }
      }
    }
  } catch (e) {
    if (e.name === 'AbortError') $('gen-stats').textContent = `stopped after ${fmtInt(n)} tokens`;
    else toast(e.message, 'error');
  } finally {
    state.genAbort = null;
    $('btn-gen').disabled = false;
    $('btn-gen-stop').disabled = true;
  }
}

// ------------------------------------------------------------------ inspect

function fillLayers() {
  const r = state.runs.find((x) => x.id === $('ins-model').value);
  const sel = $('ins-layer');
  const keep = sel.value;
  sel.replaceChildren();
  const n = r ? r.config.layers : 1;
  for (let i = 0; i < n; i++) sel.append(el('option', { value: i, text: `${i + 1} of ${n}` }));
  if (keep && +keep < n) sel.value = keep;
  const hsel = $('ins-head');
  const keepHead = hsel.value;
  const heads = r ? r.config.heads : 1;
  hsel.replaceChildren(el('option', { value: -1, text: 'all' }));
  for (let i = 0; i < heads; i++) hsel.append(el('option', { value: i, text: `${i + 1} of ${heads}` }));
  if (keepHead !== '' && +keepHead < heads) hsel.value = keepHead;
  // The server looks at most 512 bytes at a time, of which the model reads the last ctx.
  $('ins-text').maxLength = MAX_INSPECT;
}

// Limits of an inspection, as the server has them: positions, and weights in one answer.
const MAX_INSPECT = 512, MAX_INSPECT_CELLS = 2 << 20;

let inspection = null;
async function inspect() {
  const id = $('ins-model').value;
  if (!id) { toast('Train or upload a model first.', 'error'); return; }
  const r = state.runs.find((x) => x.id === id);
  const text = $('ins-text').value;
  let head = +$('ins-head').value;
  if (r && head < 0) {
    const T = Math.min(new TextEncoder().encode(text).length, r.config.ctx, MAX_INSPECT);
    if (r.config.heads * T * (T + 1) / 2 > MAX_INSPECT_CELLS) {
      head = 0;
      $('ins-head').value = '0';
      toast('Every head at once is too much for a text this long: showing one head (choose it under "head").');
    }
  }
  $('btn-inspect').disabled = true;
  try {
    inspection = await api('POST', `/api/runs/${id}/inspect`, { text, layer: +$('ins-layer').value, head });
    renderInspection(inspection.tokens.length - 1);
  } catch (e) {
    toast(e.message, 'error');
  } finally {
    $('btn-inspect').disabled = false;
  }
}

function renderInspection(pos) {
  const ins = inspection;
  $('ins-note').textContent = `weights of step ${fmtInt(ins.step)}${ins.truncated ? ` · only the last ${ins.config.ctx} bytes (the context) are used` : ''}`;
  $('ins-tokens').replaceChildren(...ins.tokens.map((t, i) =>
    el('button', { class: 'token' + (i === pos ? ' active' : ''), text: t, title: `position ${i}`, onclick: () => renderInspection(i) })));
  const row = ins.top[pos];
  $('ins-top').replaceChildren(
    el('p', {}, 'After ', el('code', { text: ins.tokens.slice(Math.max(0, pos - 11), pos + 1).join('') }), ' the model expects:'),
    el('table', { class: 'table probs' }, ...row.map((c) => el('tr', {},
      el('td', { class: 'mono', text: c.text }),
      el('td', { class: 'bar-cell' }, barEl(c.p)), // the probability itself: a guess among many shows as one
      el('td', { class: 'num', text: (100 * c.p).toFixed(1) + '%' })))));
  $('ins-att-title').classList.remove('hidden');
  $('ins-att-title').textContent = `Attention weights, layer ${ins.layer + 1} of ${ins.layers}` +
    (ins.head >= 0 ? `, head ${ins.head + 1} of ${ins.heads}` : '');
  $('ins-att-help').classList.remove('hidden');
  drawHeads($('ins-heads'), ins, pos);
}

// barEl is a bar whose length is frac of the full width.
function barEl(frac) {
  const b = el('div', { class: 'bar' });
  b.style.width = Math.max(1, 100 * frac).toFixed(1) + '%';
  return b;
}

// ------------------------------------------------------------------ machine

function renderMachine() {
  const s = state.system;
  const facts = [
    ['Processor', s.cpu], ['Cores', s.cores], ['Memory', s.memory_bytes ? fmtBytes(s.memory_bytes) : 'unknown'], ['System', s.os], ['Go', s.go],
    ['Data directory', s.dir], ['Upload limits', `corpus ${fmtBytes(s.limits.corpus_bytes)}, model ${fmtBytes(s.limits.model_bytes)}`],
  ];
  const gpu = s.backends.find((b) => b.name === 'webgpu');
  facts.splice(3, 0, ['GPU adapter', gpu && gpu.available ? gpu.detail : `not used: ${gpu ? gpu.note : 'this build has no GPU backend'}`]);
  if (state.presets && state.presets.presets[0]) facts.push(['Speed estimate', state.presets.presets[0].estimate.calibration]);
  $('machine').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: String(v) })]));
  $('backend-table').replaceChildren(
    el('tr', {}, el('th', { text: 'backend' }), el('th', { text: 'available' }), el('th', { text: 'runs on' })),
    ...s.backends.map((b) => el('tr', {}, el('td', { text: b.name }), el('td', { text: b.available ? 'yes' : 'no' }), el('td', { text: b.available ? b.detail + (b.note ? ` (${b.note})` : '') : b.note }))));
  const box = $('backends');
  box.replaceChildren(el('label', {}, el('input', { type: 'radio', name: 'backend', value: 'auto', checked: true }), ' auto (the best available)'),
    ...s.backends.map((b) => el('label', { class: b.available ? '' : 'disabled' },
      el('input', { type: 'radio', name: 'backend', value: b.name, disabled: !b.available }),
      ` ${b.name === 'cpu' ? 'CPU' : b.name === 'webgpu' ? 'WebGPU' : b.name}`,
      el('span', { class: 'hint', text: b.available ? ` — ${b.detail}${b.note ? ` (${b.note})` : ''}` : ` — ${b.note}` }))));
  $('models-dir').textContent = `Every run is kept in ${s.dir}: its settings, loss history, samples and checkpoint.`;
}

// ------------------------------------------------------------------ start

async function main() {
  liveChart = new LossChart($('live-chart'));
  $('setup').addEventListener('submit', startRun);
  $('setup').addEventListener('input', (e) => {
    if (e.target.id === 'corpus-text' || e.target.name === 'corpus') corpusChanged();
    else if (e.target.id !== 'run-name') schedulePlan();
  });
  $('corpus-file').addEventListener('change', corpusChanged);
  $('preset').addEventListener('change', presetChanged);
  $('btn-pause').addEventListener('click', () => jobAction('pause'));
  $('btn-resume').addEventListener('click', () => jobAction('resume'));
  $('btn-stop').addEventListener('click', () => jobAction('stop'));
  $('btn-continue').addEventListener('click', () => continueRun(state.job.run.id, +$('continue-steps').value));
  $('continue-steps').addEventListener('keydown', (e) => { if (e.key === 'Enter') $('btn-continue').click(); });
  $('btn-new-run').addEventListener('click', () => { state.showSetupAfterRun = true; renderLive(); $('setup').scrollIntoView({ behavior: 'smooth' }); $('preset').focus({ preventScroll: true }); });
  $('btn-sample-live').addEventListener('click', () => { state.selected = state.job.run.id; loadRuns(); location.hash = '#generate'; });
  $('btn-gen').addEventListener('click', generate);
  $('btn-gen-stop').addEventListener('click', () => state.genAbort && state.genAbort.abort());
  $('btn-inspect').addEventListener('click', inspect);
  $('ins-model').addEventListener('change', () => { state.selected = $('ins-model').value; fillLayers(); });
  $('gen-model').addEventListener('change', () => { state.selected = $('gen-model').value; });
  $('upload-model').addEventListener('change', uploadModel);

  showTab(location.hash.slice(1) || 'train');
  if (!TOKEN) {
    // Nothing on the page works without it: say so in place of the page, not over an empty form.
    document.querySelector('main').replaceChildren(el('div', { class: 'card' },
      el('h2', { text: 'This page needs its access token' }),
      el('p', { text: 'Open the address that tinygpt serve printed, which ends in #token=… (the token is also in the file token of the server\'s data folder).' })));
    return;
  }
  try {
    [state.system, state.presets] = await Promise.all([api('GET', '/api/system'), api('GET', '/api/presets')]);
  } catch (e) {
    toast('Cannot reach the server: ' + e.message, 'error', true);
    return;
  }
  state.corpusLimit = state.system.limits.corpus_bytes;
  renderMachine();
  fillPresets();
  corpusChanged();
  await loadRuns();
  connect();
  document.body.dataset.ready = 'true';
}

main();
