// The status web page: one HTML document with a small script (no build step). It reads /cluster, /queue and
// /requests, and re-reads them when the status websocket says something changed (and every 5 s regardless).
// Requests that are running are subscribed to on the same websocket: the text they generate (STREAM messages)
// shows under "Generating" as it is produced.
// With auth on, the page takes the key from #key=… once and keeps it in sessionStorage.

export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>NDIF fabric status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d232a; background: #fafbfc; }
  h1 { font-size: 1.3rem; margin: 0 0 .2rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: .25rem .6rem; border-bottom: 1px solid #e3e6ea; font-variant-numeric: tabular-nums; }
  th { font-weight: 600; color: #57606a; } .muted { color: #6e7781; } .empty td { color: #6e7781; font-style: italic; }
  .HOT { color: #1a7f37; font-weight: 600; } .WARM { color: #9a6700; } .COLD { color: #57606a; }
  .COMPLETED { color: #1a7f37; } .ERROR { color: #cf222e; } .CANCELLED { color: #6e7781; } .RUNNING, .DISPATCHED { color: #0969da; }
  #conn.live { color: #1a7f37; } #conn.down { color: #cf222e; }
  #streams pre { margin: 0; white-space: pre-wrap; font: 13px/1.4 ui-monospace, monospace; }
</style>
</head>
<body>
<h1>NDIF fabric</h1>
<div class="muted">log position <span id="asof">–</span> · <span id="conn">connecting…</span> · <span id="error"></span></div>
<h2>Models</h2>
<table id="models"><thead><tr><th>model</th><th>phase</th><th>replicas</th><th>queued</th><th>pinned</th></tr></thead><tbody></tbody></table>
<h2>Agents and GPUs</h2>
<table id="gpus"><thead><tr><th>agent</th><th>state</th><th>GPU</th><th>used / memory</th><th>replicas</th></tr></thead><tbody></tbody></table>
<h2>Queues</h2>
<table id="queues"><thead><tr><th>model</th><th>position</th><th>request</th><th>priority</th><th>requeued</th><th>enqueued</th></tr></thead><tbody></tbody></table>
<h2>Generating</h2>
<table id="streams"><thead><tr><th>request</th><th>invoke</th><th>tokens</th><th>text</th></tr></thead><tbody><tr class="empty"><td colspan="4">nothing generating</td></tr></tbody></table>
<h2>Recent requests</h2>
<table id="requests"><thead><tr><th>request</th><th>model</th><th>status</th><th>position</th><th>submitter</th><th>received</th></tr></thead><tbody></tbody></table>
<script>
(() => {
  const m = /[#&]key=([^&]+)/.exec(location.hash);
  if (m) { sessionStorage.setItem('ndifKey', decodeURIComponent(m[1])); history.replaceState(null, '', location.pathname); }
  const key = sessionStorage.getItem('ndifKey');
  const headers = key ? { 'x-api-key': key } : {};
  const $ = (id) => document.getElementById(id);
  const gib = (b) => (b / 1073741824).toFixed(2) + ' GiB';
  function row(cells, attrs) {
    const tr = document.createElement('tr');
    for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
    for (const c of cells) {
      const td = document.createElement('td');
      if (c && typeof c === 'object') { td.textContent = c.text; if (c.cls) td.className = c.cls; } else td.textContent = c == null ? '' : String(c);
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
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const [cluster, queue, recent] = await Promise.all([get('/cluster'), get('/queue'), get('/requests?limit=25')]);
      $('asof').textContent = String(cluster.asOf);
      $('error').textContent = '';
      fill('models', cluster.deployments.map((d) => row([
        d.modelKey, d.phase,
        { text: d.replicas.map((r) => r.replicaId + ' ' + r.level + (r.agentId ? ' on ' + r.agentId : '')).join(', ') || 'none', cls: d.replicas.some((r) => r.level === 'HOT') ? 'HOT' : '' },
        d.queueLength, d.pinned ? 'pinned' : '',
      ], { 'data-model': d.modelKey, 'data-phase': d.phase })), 'no deployments', 5);
      fill('gpus', cluster.gpus.map((g) => {
        const a = cluster.agents.find((x) => x.agentId === g.agentId);
        return row([g.agentId, a ? a.state : '', g.index + ' ' + g.name, gib(g.usedBytes) + ' / ' + gib(g.memoryBytes), g.replicas.join(', ')], { 'data-agent': g.agentId });
      }), 'no agents', 5);
      const qrows = [];
      for (const q of queue.queues) for (const e of q.entries) qrows.push(row([q.model, e.position, e.requestId, e.priority ? 'yes' : '', e.requeued ? 'yes' : '', e.enqueuedAt], { 'data-queued': e.requestId }));
      fill('queues', qrows, 'nothing queued', 6);
      fill('requests', recent.requests.map((r) => row([r.requestId, r.model, { text: r.status, cls: r.status + ' status' }, r.position == null ? '' : r.position, r.submitter, r.receivedAt], { 'data-request': r.requestId, 'data-status': r.status })), 'no requests yet', 6);
      for (const r of recent.requests) if (r.status === 'RUNNING' || r.status === 'DISPATCHED') follow(r.requestId);
    } catch (e) {
      $('error').textContent = String(e.message || e);
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
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
  refresh();
  connect();
  setInterval(refresh, 5000);
})();
</script>
</body>
</html>
`;
