// The status web page: one HTML document with a small script (no build step). It reads GET /live (per model: its
// replicas with their levels, its queue, the requests running with their phase timelines; agents and GPUs; the
// recent evictions and requeues with why they happened) and GET /requests, and reads them again whenever the
// status websocket's cluster watch says something changed (and every 5 s regardless). A running phase's clock
// ticks every second without a request. With auth on, the page takes the key from #key=… once and keeps it in
// sessionStorage. Everything shown is set as text (never as HTML). Requests that are running are subscribed to on
// the same websocket: the text they generate (STREAM messages) shows under "Generating" as it is produced.
// "Over time" plots GET /live/series (queue depth and running, throughput, latency, GPU memory) with uPlot (served
// at /assets/uplot.js); running requests' timelines are bars whose segments are to scale. A request's own page
// (#request=<id>) shows its timeline, error, log lines and — for an operator — the why story (GET /why/:id).

export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>NDIF fabric status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/uplot.css">
<script src="/assets/uplot.js"></script>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d232a; background: #fafbfc; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; } h3 { font-size: 1rem; margin: 0; display: inline; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: .25rem .6rem; border-bottom: 1px solid #e3e6ea; font-variant-numeric: tabular-nums; vertical-align: top; }
  th { font-weight: 600; color: #57606a; } .muted { color: #6e7781; } .empty, .empty td { color: #6e7781; font-style: italic; }
  .HOT { color: #1a7f37; font-weight: 600; } .WARM { color: #9a6700; } .COLD { color: #57606a; }
  .COMPLETED { color: #1a7f37; } .ERROR { color: #cf222e; } .CANCELLED { color: #6e7781; } .RUNNING, .DISPATCHED { color: #0969da; }
  #conn.live { color: #1a7f37; } #conn.down { color: #cf222e; }
  #streams pre { margin: 0; white-space: pre-wrap; font: 13px/1.4 ui-monospace, monospace; }
  .model { background: #fff; border: 1px solid #e3e6ea; border-radius: 6px; padding: .6rem .8rem; margin: .5rem 0; }
  .model header { margin-bottom: .4rem; } .model header span { margin-left: .6rem; }
  .replica { display: inline-block; border: 1px solid #e3e6ea; border-radius: 4px; padding: 0 .4rem; margin: 0 .3rem .3rem 0; }
  .label { color: #57606a; font-weight: 600; margin-right: .4rem; }
  .run { margin: .2rem 0 .4rem; } .timeline { display: flex; width: 100%; max-width: 60rem; height: 1.3rem; margin-top: .15rem; background: #f6f8fa; border-radius: 3px; overflow: hidden; }
  .seg { flex: 0 0 auto; min-width: 3px; box-sizing: border-box; padding: 0 .3rem; border-right: 1px solid #fff; font-size: 12px; line-height: 1.3rem; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; background: #eaeef2; }
  .plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(26rem, 1fr)); gap: .6rem; }
  .plot { background: #fff; border: 1px solid #e3e6ea; border-radius: 6px; padding: .4rem; min-height: 12rem; }
  .plot h4 { margin: 0 0 .2rem; font-size: .9rem; color: #57606a; }
  #request-page { display: none; } body.one #request-page { display: block; } body.one #overview { display: none; }
  #request-page pre { background: #fff; border: 1px solid #e3e6ea; padding: .5rem; white-space: pre-wrap; font: 12px/1.4 ui-monospace, monospace; max-height: 24rem; overflow: auto; }
  a { color: #0969da; }
  .seg.QUEUED, .seg.RECEIVED { background: #fff8c5; } .seg.DISPATCHED { background: #ddf4ff; } .seg.RUNNING { background: #b6e3ff; } .seg.REQUEUED { background: #ffebe9; }
  .seg.now { outline: 1px dashed #0969da; }
  ol.queue { margin: .2rem 0; padding-left: 1.4rem; }
  .causes { margin: .2rem 0 0; padding-left: 1.1rem; color: #57606a; }
</style>
</head>
<body>
<h1>NDIF fabric</h1>
<div class="muted">log position <span id="asof">–</span> · <span id="conn">connecting…</span> · <span id="error"></span></div>
<div id="overview">
<h2>Over time</h2>
<div class="plots">
  <div class="plot" id="plot-queue"><h4>queue depth and running</h4></div>
  <div class="plot" id="plot-throughput"><h4>throughput (requests finished per second)</h4></div>
  <div class="plot" id="plot-latency"><h4>latency, received → finished (ms)</h4></div>
  <div class="plot" id="plot-gpu"><h4>GPU memory held (GiB)</h4></div>
</div>
<h2>Models</h2>
<div id="models"></div>
<h2>Agents and GPUs</h2>
<table id="gpus"><thead><tr><th>agent</th><th>state</th><th>GPU</th><th>used / memory</th><th>replicas</th></tr></thead><tbody></tbody></table>
<h2>Recent evictions and requeues</h2>
<table id="changes"><thead><tr><th>at</th><th>what</th><th>model</th><th>of</th><th>reason</th><th>why</th></tr></thead><tbody></tbody></table>
<h2>Generating</h2>
<table id="streams"><thead><tr><th>request</th><th>invoke</th><th>tokens</th><th>text</th></tr></thead><tbody><tr class="empty"><td colspan="4">nothing generating</td></tr></tbody></table>
<h2>Recent requests</h2>
<table id="requests"><thead><tr><th>request</th><th>model</th><th>status</th><th>position</th><th>submitter</th><th>received</th></tr></thead><tbody></tbody></table>
</div>
<section id="request-page">
<p><a href="#" id="back">← all of the fabric</a></p>
<h2 id="rq-title">request</h2>
<div id="rq-summary" class="muted"></div>
<h2>Timeline</h2>
<div id="rq-timeline"></div>
<table id="rq-statuses"><thead><tr><th>at</th><th>status</th><th>attempt</th><th>detail</th></tr></thead><tbody></tbody></table>
<h2>Error</h2>
<div id="rq-error" class="empty">none</div>
<h2>Log lines</h2>
<pre id="rq-logs"></pre>
<h2>Why</h2>
<pre id="rq-why"></pre>
</section>
<script>
(() => {
  const m = /[#&]key=([^&]+)/.exec(location.hash);
  if (m) { sessionStorage.setItem('ndifKey', decodeURIComponent(m[1])); history.replaceState(null, '', location.pathname); }
  const key = sessionStorage.getItem('ndifKey');
  const headers = key ? { 'x-api-key': key } : {};
  const $ = (id) => document.getElementById(id);
  const gib = (b) => (b / 1073741824).toFixed(2) + ' GiB';
  const dur = (ms) => (ms < 1000 ? Math.max(0, Math.round(ms)) + ' ms' : ms < 60000 ? (ms / 1000).toFixed(1) + ' s' : Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s');
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined && v !== false) e.setAttribute(k, String(v));
    for (const c of children) if (c !== null && c !== undefined) e.append(typeof c === 'string' || typeof c === 'number' ? String(c) : c);
    return e;
  }
  function row(cells, attrs) {
    const tr = el('tr', attrs);
    for (const c of cells) {
      if (c instanceof Node) { tr.append(el('td', {}, c)); continue; }
      const td = el('td', c && typeof c === 'object' && c.cls ? { class: c.cls } : {});
      td.textContent = c && typeof c === 'object' ? c.text : c == null ? '' : String(c);
      tr.appendChild(td);
    }
    return tr;
  }
  function fill(id, rows, empty, width) {
    const body = $(id).tBodies[0];
    body.replaceChildren(...(rows.length ? rows : [Object.assign(row([empty]), { className: 'empty' })]));
    if (!rows.length) body.rows[0].cells[0].colSpan = width;
  }
  async function get(path) {
    const r = await fetch(path, { headers });
    const body = await r.json();
    if (!r.ok) throw new Error(body.code + ': ' + body.message);
    return body;
  }
  let ws = null;
  const followed = new Set();
  const streams = new Map();
  function follow(requestId) {
    if (followed.has(requestId) || !ws || ws.readyState !== 1) return;
    followed.add(requestId);
    ws.send(JSON.stringify({ type: 'subscribe', requestId }));
  }
  function onTokens(requestId, tokens) {
    const body = $('streams').tBodies[0];
    if (body.querySelector('.empty')) body.replaceChildren();
    for (const t of tokens) {
      const k = requestId + '/' + t.invoke;
      let s = streams.get(k);
      if (!s) {
        const tr = row([requestId, t.invoke, 0, ''], { 'data-stream': requestId, 'data-invoke': String(t.invoke) });
        const pre = document.createElement('pre');
        tr.cells[3].appendChild(pre);
        body.appendChild(tr);
        s = { tr, pre, next: 0 };
        streams.set(k, s);
      }
      if (t.step !== s.next) continue;
      s.next++;
      s.pre.textContent += t.text == null ? '[' + t.token + ']' : t.text;
      s.tr.cells[2].textContent = String(s.next);
      if (t.finish) s.tr.setAttribute('data-finish', t.finish.reason);
    }
  }
  // The last answer and when it arrived: a running phase is drawn up to the server's now plus the time since.
  let live = null, liveAt = 0;
  // A timeline as one bar: each phase a segment as wide as its share of the time so far (the running one grows).
  function bar(entries, now) {
    const t = entries;
    const start = t.length ? Date.parse(t[0].at) : now;
    const total = Math.max(1, now - start);
    const b = el('div', { class: 'timeline' });
    for (let i = 0; i < t.length; i++) {
      const e = t[i];
      const end = i + 1 < t.length ? Date.parse(t[i + 1].at) : now;
      const last = i + 1 === t.length;
      const ms = end - Date.parse(e.at);
      const text = e.status + (e.detail && e.status === 'REQUEUED' ? ' ' + e.detail : '') + ' ' + dur(ms);
      const seg = el('span', { class: 'seg ' + e.status + (last ? ' now' : ''), 'data-phase': e.status, 'data-ms': Math.round(ms), title: text + ' · ' + e.at + (e.detail ? ' · ' + e.detail : '') + (e.attempt ? ' · attempt ' + e.attempt : '') }, text);
      seg.style.width = (100 * Math.max(0, ms) / total).toFixed(3) + '%';
      b.append(seg);
    }
    return b;
  }
  function timeline(run) {
    return bar(run.timeline, live.now + (Date.now() - liveAt));
  }
  function modelCard(d) {
    const card = el('section', { class: 'model', 'data-model': d.model, 'data-phase': d.phase },
      el('header', {}, el('h3', {}, d.model), el('span', { class: 'phase' }, d.phase), d.pinned ? el('span', {}, 'pinned') : null,
        el('span', { class: 'muted' }, d.queueLength + ' queued'), d.lastFailure ? el('span', { class: 'ERROR' }, d.lastFailure) : null));
    const reps = el('div', { class: 'replicas' }, el('span', { class: 'label' }, 'replicas'));
    if (!d.replicas.length) reps.append(el('span', { class: 'empty' }, 'none'));
    for (const r of d.replicas) reps.append(el('span', { class: 'replica ' + r.level, 'data-replica': r.replicaId, 'data-level': r.level, 'data-state': r.state }, r.replicaId + ' ' + r.level + (r.level !== r.state ? ' (' + r.state + ')' : '') + (r.agentId ? ' on ' + r.agentId : '')));
    const runs = el('div', { class: 'running' }, el('span', { class: 'label' }, 'running'));
    if (!d.running.length) runs.append(el('span', { class: 'empty' }, 'nothing'));
    for (const r of d.running) {
      runs.append(el('div', { class: 'run', 'data-running': r.requestId, 'data-status': r.status, 'data-attempt': r.attempt },
        el('span', { class: r.status }, r.requestId), ' ' + r.status + ' · attempt ' + r.attempt + (r.replicaId ? ' · ' + r.replicaId : '') + (r.agentId ? ' on ' + r.agentId : '') + (r.submitter ? ' · ' + r.submitter : ''),
        timeline(r)));
    }
    const q = el('div', { class: 'queued' }, el('span', { class: 'label' }, 'queue'));
    if (!d.queue.length) q.append(el('span', { class: 'empty' }, 'empty'));
    else {
      const ol = el('ol', { class: 'queue', start: 0 });
      for (const e of d.queue) ol.append(el('li', { 'data-queued': e.requestId, 'data-requeued': e.requeued ? 'yes' : null }, e.requestId + (e.priority ? ' · priority' : '') + (e.requeued ? ' · requeued' : '') + ' · waiting ' + dur(live.now - Date.parse(e.enqueuedAt))));
      if (d.queueLength > d.queue.length) ol.append(el('li', { class: 'muted' }, '… ' + (d.queueLength - d.queue.length) + ' more'));
      q.append(ol);
    }
    card.append(reps, runs, q);
    return card;
  }
  function render() {
    if (!live) return;
    $('models').replaceChildren(...(live.models.length ? live.models.map(modelCard) : [el('div', { class: 'empty' }, 'no deployments')]));
  }
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const [page, recent] = await Promise.all([get('/live'), get('/requests?limit=25')]);
      live = page; liveAt = Date.now();
      $('asof').textContent = String(page.asOf);
      $('error').textContent = '';
      render();
      fill('gpus', page.gpus.map((g) => {
        const a = page.agents.find((x) => x.agentId === g.agentId);
        return row([g.agentId, a ? a.state : '', g.index + ' ' + g.name, gib(g.usedBytes) + ' / ' + gib(g.memoryBytes), g.replicas.join(', ')], { 'data-agent': g.agentId });
      }), 'no agents', 5);
      fill('changes', page.changes.map((c) => row([
        c.at, c.kind, c.model, c.subject, c.reason || '',
        el('div', {}, el('div', { class: 'summary' }, c.summary + (c.rule ? ' [' + c.rule + ']' : '')), c.causes.length ? el('ul', { class: 'causes' }, ...c.causes.map((x) => el('li', {}, x))) : null),
      ], { 'data-change': c.position, 'data-kind': c.kind, 'data-subject': c.subject })), 'no evictions or requeues', 6);
      fill('requests', recent.requests.map((r) => row([
        el('a', { href: '#request=' + encodeURIComponent(r.requestId) }, r.requestId), r.model,
        { text: r.status + (r.error ? ' · ' + r.error.type : ''), cls: r.status + ' status' },
        r.position == null ? '' : r.position, r.submitter, r.receivedAt,
      ], { 'data-request': r.requestId, 'data-status': r.status, 'data-error': r.error ? r.error.type : null })), 'no requests yet', 6);
      plots(await get('/live/series'));
      for (const r of recent.requests) if (r.status === 'RUNNING' || r.status === 'DISPATCHED') follow(r.requestId);
    } catch (e) {
      $('error').textContent = String(e.message || e);
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
  const charts = {};
  const COLORS = ['#0969da', '#cf222e', '#1a7f37', '#9a6700', '#8250df', '#57606a'];
  function chart(id, names, xs, ys) {
    const box = $(id);
    const width = Math.max(300, box.clientWidth - 10);
    const data = [xs, ...ys];
    const key = names.join('|');
    if (charts[id] && charts[id].key === key) { charts[id].u.setData(data); return; }
    if (charts[id]) charts[id].u.destroy();
    const series = [{}].concat(names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true })));
    const u = new uPlot({ width, height: 170, series, axes: [{}, { size: 56 }], scales: { x: { time: true } }, legend: { live: false } }, data, box);
    charts[id] = { u, key };
  }
  function plots(series) {
    if (typeof uPlot === 'undefined') return;
    const s = series.samples;
    const xs = s.map((x) => x.at / 1000);
    chart('plot-queue', ['queued', 'running'], xs, [s.map((x) => x.queued), s.map((x) => x.running)]);
    chart('plot-throughput', ['finished / s'], xs, [s.map((x) => x.throughput)]);
    chart('plot-latency', ['p50 ms', 'max ms'], xs, [s.map((x) => x.latencyP50Ms), s.map((x) => x.latencyMaxMs)]);
    const gpus = [...new Set(s.flatMap((x) => Object.keys(x.gpuUsedBytes)))].sort();
    chart('plot-gpu', gpus.length ? gpus.concat(['memory']) : ['memory'], xs,
      gpus.map((g) => s.map((x) => (x.gpuUsedBytes[g] ?? 0) / 1073741824)).concat([s.map((x) => x.gpuMemoryBytes / 1073741824)]));
    document.body.setAttribute('data-samples', String(s.length));
  }
  async function showRequest(id) {
    document.body.classList.add('one');
    $('rq-title').textContent = 'request ' + id;
    try {
      const r = await get('/requests/' + encodeURIComponent(id));
      const final = ['COMPLETED', 'ERROR', 'CANCELLED'].includes(r.status);
      const changes = r.statuses.filter((x) => !['LOG', 'STREAM', 'TRACE', 'RESULT_WRITING'].includes(x.status));
      const last = changes.length ? Date.parse(changes[changes.length - 1].at) : Date.now();
      $('rq-summary').textContent = r.model + ' · ' + r.status + ' · attempt ' + r.attempt + (r.agentId ? ' · on ' + r.agentId : '') + (r.replicaId ? ' (' + r.replicaId + ')' : '');
      $('rq-timeline').replaceChildren(bar(changes.map((x) => ({ status: x.status, at: x.at, attempt: x.attempt, detail: x.reason })), final ? last : Date.now()));
      fill('rq-statuses', changes.map((x) => row([x.at, { text: x.status, cls: x.status }, x.attempt == null ? '' : x.attempt, x.reason || ''])), 'no statuses', 4);
      const err = $('rq-error');
      if (r.error) {
        err.className = 'ERROR';
        err.replaceChildren(el('div', { 'data-error-type': r.error.type }, r.error.type + ' (' + r.error.phase + '): ' + r.error.message), r.error.stack ? el('pre', {}, r.error.stack) : null);
      } else { err.className = 'empty'; err.textContent = 'none'; }
      $('rq-logs').textContent = r.logs.length ? r.logs.map((l) => (l.stream === 'stderr' ? '! ' : '') + l.line).join('\\n') : '(no log lines)';
      const w = await fetch('/why/' + encodeURIComponent(id) + '?format=text', { headers });
      $('rq-why').textContent = w.ok ? await w.text() : w.status === 403 ? 'the why story is for operators' : 'why: ' + w.status;
      document.body.setAttribute('data-request-page', id);
    } catch (e) {
      $('rq-summary').textContent = String(e.message || e);
    }
  }
  function route() {
    const m = /^#request=(.+)$/.exec(location.hash);
    if (m) showRequest(decodeURIComponent(m[1]));
    else { document.body.classList.remove('one'); document.body.removeAttribute('data-request-page'); }
  }
  window.addEventListener('hashchange', route);
  $('back').addEventListener('click', (e) => { e.preventDefault(); history.pushState(null, '', location.pathname); route(); });
  function connect() {
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws' + (key ? '?key=' + encodeURIComponent(key) : '');
    ws = new WebSocket(url);
    followed.clear();
    ws.onopen = () => { $('conn').textContent = 'live'; $('conn').className = 'live'; ws.send(JSON.stringify({ type: 'watch', topic: 'cluster' })); refresh(); };
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === 'changed') refresh();
      else if (msg.type === 'status' && msg.status === 'STREAM') onTokens(msg.requestId, msg.tokens);
    };
    ws.onclose = () => { $('conn').textContent = 'reconnecting…'; $('conn').className = 'down'; setTimeout(connect, 1000); };
  }
  route();
  refresh();
  connect();
  setInterval(refresh, 5000);
  setInterval(render, 1000);
})();
</script>
</body>
</html>
`;
