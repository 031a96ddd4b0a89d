// weft's web UI: the runs, one run (its timeline, graph, tasks and status
// lane), the queues and daemons. Plain JavaScript over weftd's REST API on
// the same origin; nothing is fetched from anywhere else.
'use strict';

const STATUSES = ['RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED'];
const ENDED = ['COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED'];
const PAGE = 50;
let token = localStorage.getItem('weft.token') || '';
let leave = () => {}; // what the page shown now stops (timers, streams) when another is shown

// ---- small helpers ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'style') Object.assign(e.style, v); // (a style attribute: the page's policy refuses it)
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

// node's children replaced by kids (null, undefined and false left out)
function fill(node, ...kids) {
  node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

function badge(status) {
  return el('span', { class: `badge s-${status}`, 'data-status': status, text: status });
}

function when(ms) {
  if (!ms) return '';
  const d = new Date(typeof ms === 'number' ? ms : Date.parse(ms));
  return isNaN(d) ? '' : d.toLocaleString();
}

function duration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

function json(v) {
  return el('pre', { class: 'mono' }, JSON.stringify(v === undefined ? null : v, null, 2));
}

function flash(text, bad) {
  const f = document.getElementById('flash');
  f.textContent = text;
  f.className = bad ? 'err' : '';
  f.hidden = false;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { f.hidden = true; }, bad ? 8000 : 3000);
}

function headers(body) {
  const h = {};
  if (token) h.Authorization = `Bearer ${token}`;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  return h;
}

// A call to the REST API: its JSON (or text). A 401 asks for the token.
async function api(method, path, body) {
  const r = await fetch(path, {
    method, headers: headers(body), body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status === 401) {
    askToken();
    throw new Error('this weftd needs its API token');
  }
  if (!r.ok) {
    let msg = text;
    try { msg = JSON.parse(text).message || text; } catch (e) { /* as sent */ }
    throw new Error(`${r.status}: ${msg}`);
  }
  if (!text) return null;
  return (r.headers.get('Content-Type') || '').includes('json') ? JSON.parse(text) : text;
}

function askToken() {
  const d = document.getElementById('token-dialog');
  if (d.open) return;
  document.getElementById('token-input').value = token;
  d.showModal();
}

function setupToken() {
  const d = document.getElementById('token-dialog');
  document.getElementById('token-button').addEventListener('click', askToken);
  d.addEventListener('close', () => {
    if (d.returnValue !== 'save') return;
    token = document.getElementById('token-input').value.trim();
    localStorage.setItem('weft.token', token);
    document.getElementById('flash').hidden = true;
    route();
  });
}

// ---- the runs ----

// The hash's parameters: #/runs?status=FAILED&name=x
function params() {
  const q = location.hash.split('?')[1] || '';
  return Object.fromEntries(new URLSearchParams(q));
}

function setParams(p) {
  const q = new URLSearchParams(Object.entries(p).filter(([, v]) => v !== '' && v !== undefined));
  location.hash = `#/runs${q.toString() ? `?${q}` : ''}`;
}

const quote = (s) => `'${String(s).replace(/'/g, '')}'`;

// Conductor's query for the filters (all but the status, which counts leave out).
function query(p, withStatus) {
  const c = [];
  if (withStatus && p.status) c.push(`status = ${p.status}`);
  if (p.name) c.push(`workflowType = ${quote(p.name)}`);
  if (p.since) c.push(`startTime > ${Date.now() - Number(p.since) * 60000}`);
  if (p.corr) c.push(`correlationId = ${quote(p.corr)}`);
  return c.join(' AND ');
}

function searchPath(p, size, start, withStatus, status) {
  const q = [query(p, withStatus), status ? `status = ${status}` : ''].filter(Boolean).join(' AND ');
  const u = new URLSearchParams({ size: String(size), start: String(start || 0), sort: 'startTime:DESC' });
  if (q) u.set('query', q);
  if (p.id) u.set('freeText', p.id);
  return `/api/workflow/search?${u}`;
}

async function runsPage(main) {
  const p = params();
  const start = Number(p.start || 0);
  const counts = el('div', { class: 'counts', id: 'counts' });
  const body = el('tbody');
  const pager = el('div', { class: 'pager' });
  const names = el('datalist', { id: 'names' });
  const field = (label, input) => el('label', {}, label, input);
  const statusSel = el('select', { name: 'status' }, el('option', { value: '', text: 'any' }),
    STATUSES.map((s) => el('option', { value: s, text: s, selected: p.status === s })));
  const sinceSel = el('select', { name: 'since' },
    [['', 'any time'], ['15', 'last 15 minutes'], ['60', 'last hour'], ['1440', 'last 24 hours'],
      ['10080', 'last 7 days']].map(([v, t]) => el('option', { value: v, text: t, selected: (p.since || '') === v })));
  const form = el('form', { class: 'filters', id: 'filters' },
    field('Status', statusSel),
    field('Workflow', el('input', { name: 'name', list: 'names', value: p.name || '', placeholder: 'name' })),
    field('Started', sinceSel),
    field('Correlation id', el('input', { name: 'corr', value: p.corr || '' })),
    field('Workflow id', el('input', { name: 'id', value: p.id || '', size: 38 })),
    el('button', { class: 'act', type: 'submit', text: 'Filter' }),
    el('button', { class: 'act', type: 'button', text: 'Clear', onclick: () => setParams({}) }));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setParams(Object.fromEntries(new FormData(form)));
  });
  form.addEventListener('change', (e) => {
    if (e.target.tagName === 'SELECT') setParams(Object.fromEntries(new FormData(form)));
  });
  fill(main, el('h1', { text: 'Runs' }), counts, form, names,
    el('table', { id: 'runs' }, el('thead', {}, el('tr', {},
      ['Workflow id', 'Workflow', 'Status', 'Started', 'Took', 'Correlation id', 'Reason'].map((t) => el('th', { text: t })))), body),
    pager);
  api('GET', '/api/metadata/workflow').then((defs) => {
    const seen = new Set((defs || []).map((d) => d.name));
    fill(names, ...[...seen].sort().map((n) => el('option', { value: n })));
  }).catch(() => {});

  async function refresh() {
    try {
      const [page, ...n] = await Promise.all([
        api('GET', searchPath(p, PAGE, start, true)),
        ...STATUSES.map((s) => api('GET', searchPath(p, 0, 0, false, s))),
      ]);
      fill(counts, ...STATUSES.map((s, i) => el('div', {
        class: `count${p.status === s ? ' on' : ''}`, 'data-count': s, title: `show the ${s} runs`,
        onclick: () => setParams({ ...p, status: p.status === s ? '' : s, start: '' }),
      }, el('b', { text: n[i].totalHits }), badge(s))));
      fill(body, ...page.results.map((r) => {
        const took = r.endTime ? Date.parse(r.endTime) - Date.parse(r.startTime)
          : Date.now() - Date.parse(r.startTime);
        return el('tr', { class: 'clickable', 'data-id': r.workflowId, onclick: () => { location.hash = `#/run/${r.workflowId}`; } },
          el('td', { class: 'mono' }, el('a', { href: `#/run/${r.workflowId}`, text: r.workflowId })),
          el('td', {}, `${r.workflowType} `, el('span', { class: 'muted', text: `v${r.version}` })),
          el('td', {}, badge(r.status)),
          el('td', { text: when(r.startTime) }),
          el('td', { text: duration(took) }),
          el('td', { text: r.correlationId || '' }),
          el('td', { class: 'reason' }, (r.reasonForIncompletion || '').slice(0, 160),
            r.failedReferenceTaskNames ? el('div', { class: 'muted', text: `failed: ${r.failedReferenceTaskNames}` }) : null));
      }));
      if (!page.results.length) fill(body, el('tr', {}, el('td', { colspan: 7, class: 'muted', text: 'No runs match.' })));
      fill(pager, 
        el('span', { class: 'muted', text: page.totalHits ? `${start + 1}–${start + page.results.length} of ${page.totalHits}` : '' }),
        start > 0 ? el('button', { class: 'act', text: 'Newer', onclick: () => setParams({ ...p, start: String(Math.max(0, start - PAGE)) }) }) : null,
        start + PAGE < page.totalHits ? el('button', { class: 'act', text: 'Older', onclick: () => setParams({ ...p, start: String(start + PAGE) }) }) : null);
    } catch (e) {
      flash(e.message, true);
    }
  }
  await refresh();
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, 2000);
  return () => clearInterval(timer);
}

// ---- one run ----

// The actions a run's status allows: [label, method, path suffix, danger]
function actions(status) {
  if (status === 'RUNNING') return [['Pause', 'PUT', '/pause'], ['Terminate', 'DELETE', '', true]];
  if (status === 'PAUSED') return [['Resume', 'PUT', '/resume'], ['Terminate', 'DELETE', '', true]];
  if (status === 'COMPLETED') return [['Restart', 'POST', '/restart']];
  return [['Retry', 'POST', '/retry'], ['Restart', 'POST', '/restart']];
}

// The instances of each definition ref (loop iterations end in "__<n>").
function byRef(tasks) {
  const m = new Map();
  for (const t of tasks) {
    const ref = t.referenceTaskName.replace(/(__\d+)+$/, '');
    if (!m.has(ref)) m.set(ref, []);
    m.get(ref).push(t);
  }
  return m;
}

// The definition's tasks as nested boxes, each coloured by its latest instance.
function graph(list, refs) {
  const box = el('div', { class: 'graph' });
  for (const d of list || []) {
    const inst = refs.get(d.taskReferenceName) || [];
    const last = inst[inst.length - 1];
    const node = el('div', { class: `node${last ? ` s-${last.status}` : ''}`, 'data-ref': d.taskReferenceName },
      d.taskReferenceName, el('span', { class: 'type', text: d.type }),
      inst.length > 1 ? el('span', { class: 'type', text: `×${inst.length}` }) : null,
      last && last.subWorkflowId ? el('a', { class: 'type', href: `#/run/${last.subWorkflowId}`, text: 'child run →' }) : null);
    box.append(node);
    if (d.type === 'FORK_JOIN' || d.type === 'FORK') {
      box.append(el('div', { class: 'branches' }, (d.forkTasks || []).map((b, i) =>
        el('div', { class: 'branch' }, el('span', { class: 'label', text: `branch ${i + 1}` }), graph(b, refs)))));
    } else if (d.type === 'DECISION' || d.type === 'SWITCH') {
      const cases = Object.entries(d.decisionCases || {});
      if (d.defaultCase && d.defaultCase.length) cases.push(['default', d.defaultCase]);
      box.append(el('div', { class: 'branches' }, cases.map(([k, b]) =>
        el('div', { class: 'branch' }, el('span', { class: 'label', text: `case ${k}` }), graph(b, refs)))));
    } else if (d.type === 'DO_WHILE') {
      box.append(el('div', { class: 'loop' }, el('span', { class: 'label', text: 'loop' }), graph(d.loopOver, refs)));
    }
  }
  return box;
}

function timeline(wf, pick) {
  const t0 = wf.createTime;
  const end = Math.max(wf.endTime || Date.now(), ...wf.tasks.map((t) => t.endTime || 0));
  const span = Math.max(1, end - t0);
  const pct = (ms) => `${Math.max(0, Math.min(100, ((ms - t0) / span) * 100)).toFixed(2)}%`;
  const rows = wf.tasks.map((t) => {
    const from = t.startTime || t.scheduledTime;
    const to = t.endTime || (ENDED.includes(wf.status) ? from : Date.now());
    const took = t.startTime ? (t.endTime || Date.now()) - t.startTime : null;
    return el('tr', { class: 'clickable', 'data-task': t.taskId, 'data-ref': t.referenceTaskName, onclick: () => pick(t) },
      el('td', { class: 'mono', text: t.referenceTaskName }),
      el('td', { text: t.taskType }),
      el('td', {}, badge(t.status)),
      el('td', { text: String((t.retryCount || 0) + 1) }),
      el('td', { text: t.startTime ? duration(took) : '' }),
      el('td', { class: 'bar' }, el('div', { class: 'track' },
        t.startTime ? el('div', { class: 'wait', style: { left: pct(t.scheduledTime), width: `calc(${pct(t.startTime)} - ${pct(t.scheduledTime)})` } }) : null,
        el('div', { class: `runbar s-${t.status}`, style: { left: pct(from), width: `calc(${pct(to)} - ${pct(from)})` } }))),
      el('td', { class: 'reason', text: (t.reasonForIncompletion || '').slice(0, 200) }));
  });
  return el('table', { class: 'gantt', id: 'timeline' }, el('thead', {}, el('tr', {},
    ['Task', 'Type', 'Status', 'Attempt', 'Took', `Timeline (${duration(span)})`, 'Reason'].map((h) => el('th', { text: h })))),
  el('tbody', {}, rows));
}

async function taskPanel(panel, wf, t, act) {
  const logs = el('div', { class: 'events', id: 'task-logs' }, el('span', { class: 'muted', text: 'loading…' }));
  const signal = t.status === 'IN_PROGRESS' && ['WAIT', 'HUMAN'].includes(t.taskType)
    ? el('button', {
      class: 'act', id: 'signal', text: 'Complete this wait (signal)',
      onclick: () => act(`Signalled ${t.referenceTaskName}`, 'POST',
        `/api/tasks/${wf.workflowId}/${encodeURIComponent(t.referenceTaskName)}/COMPLETED`, {}),
    }) : null;
  fill(panel, el('h2', { text: `Task ${t.referenceTaskName}` }),
    el('dl', { class: 'facts' },
      el('dt', { text: 'Task id' }), el('dd', { class: 'mono', text: t.taskId }),
      el('dt', { text: 'Type' }), el('dd', { text: `${t.taskType} (${t.taskDefName})` }),
      el('dt', { text: 'Status' }), el('dd', {}, badge(t.status)),
      el('dt', { text: 'Attempt' }), el('dd', { text: `${(t.retryCount || 0) + 1}, polled ${t.pollCount || 0} times` }),
      el('dt', { text: 'Scheduled' }), el('dd', { text: when(t.scheduledTime) }),
      el('dt', { text: 'Started' }), el('dd', { text: when(t.startTime) }),
      el('dt', { text: 'Ended' }), el('dd', { text: when(t.endTime) }),
      t.workerId ? [el('dt', { text: 'Worker' }), el('dd', { text: t.workerId })] : null,
      t.subWorkflowId ? [el('dt', { text: 'Child run' }), el('dd', {}, el('a', { href: `#/run/${t.subWorkflowId}`, text: t.subWorkflowId }))] : null),
    t.reasonForIncompletion ? el('p', { class: 'reason', id: 'task-reason', text: t.reasonForIncompletion }) : null,
    signal,
    el('h2', { text: 'Input' }), json(t.inputData),
    el('h2', { text: 'Output' }), json(t.outputData),
    el('h2', { text: 'Log' }), logs);
  try {
    const lines = await api('GET', `/api/tasks/${t.taskId}/log`);
    fill(logs, ...(lines.length ? lines.map((l) => el('div', {}, el('span', { class: 'muted', text: `${when(l.createdTime)}  ` }), l.log))
      : [el('span', { class: 'muted', text: 'nothing logged' })]));
  } catch (e) {
    logs.textContent = e.message;
  }
}

async function runPage(main, id) {
  let wf = null;
  let picked = null;
  const head = el('div');
  const bar = el('div', { id: 'actions' });
  const tl = el('div');
  const gr = el('div', { class: 'card' });
  const panel = el('div', { class: 'card', id: 'task' }, el('span', { class: 'muted', text: 'Pick a task in the timeline to see its input, output and log.' }));
  const lane = el('div', { class: 'events mono', id: 'lane' });
  const abort = new AbortController();
  fill(main, head, bar, el('h2', { text: 'Timeline' }), tl,
    el('div', { class: 'grid2' }, el('div', {}, el('h2', { text: 'Graph' }), gr), el('div', {}, el('h2', { text: 'Selected task' }), panel)),
    el('h2', { text: 'Status lane (live)' }), lane);

  const pick = (t) => {
    picked = t.taskId;
    for (const r of tl.querySelectorAll('tr.sel')) r.classList.remove('sel');
    const row = tl.querySelector(`tr[data-task="${t.taskId}"]`);
    if (row) row.classList.add('sel');
    taskPanel(panel, wf, t, act);
  };

  const act = async (what, method, path, body) => {
    try {
      await api(method, path, body);
      flash(what);
      await load();
    } catch (e) {
      flash(e.message, true);
    }
  };

  async function load() {
    try {
      wf = await api('GET', `/api/workflow/${encodeURIComponent(id)}`);
    } catch (e) {
      fill(head, el('h1', { text: `Run ${id}` }), el('p', { class: 'reason', text: e.message }));
      return;
    }
    const took = (wf.endTime || Date.now()) - wf.createTime;
    fill(head, el('h1', {}, `${wf.workflowName} `, el('span', { class: 'muted', text: `v${wf.version}` }), ' ', badge(wf.status)),
      el('div', { class: 'card' }, el('dl', { class: 'facts' },
        el('dt', { text: 'Workflow id' }), el('dd', { class: 'mono', id: 'run-id', text: wf.workflowId }),
        wf.correlationId ? [el('dt', { text: 'Correlation id' }), el('dd', { text: wf.correlationId })] : null,
        el('dt', { text: 'Started' }), el('dd', { text: when(wf.createTime) }),
        wf.endTime ? [el('dt', { text: 'Ended' }), el('dd', { text: when(wf.endTime) })] : null,
        el('dt', { text: 'Took' }), el('dd', { text: duration(took) }),
        wf.parentWorkflowId ? [el('dt', { text: 'Parent run' }), el('dd', {}, el('a', { href: `#/run/${wf.parentWorkflowId}`, text: wf.parentWorkflowId }))] : null,
        wf.reasonForIncompletion ? [el('dt', { text: 'Reason' }), el('dd', { class: 'reason', id: 'run-reason', text: wf.reasonForIncompletion })] : null),
      el('div', { class: 'grid2' }, el('div', {}, el('h2', { text: 'Input' }), json(wf.input)),
        el('div', {}, el('h2', { text: 'Output' }), json(wf.output)))));
    fill(bar, ...actions(wf.status).map(([label, method, suffix, danger]) => el('button', {
      class: `act${danger ? ' danger' : ''}`, 'data-action': label.toLowerCase(), text: label,
      onclick: () => act(`${label}: done`, method, `/api/workflow/${wf.workflowId}${suffix}`),
    })));
    fill(tl, timeline(wf, pick));
    fill(gr, graph((wf.workflowDefinition || {}).tasks, byRef(wf.tasks)));
    const t = wf.tasks.find((x) => x.taskId === picked);
    if (t) pick(t);
  }

  // the status lane over Server-Sent Events, read with fetch so the token goes along
  let pending = null;
  async function follow() {
    try {
      const r = await fetch(`/api/workflow/${encodeURIComponent(id)}/events`, { headers: headers(), signal: abort.signal });
      if (!r.ok || !r.body) return;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          if (!data) continue;
          let ev;
          try { ev = JSON.parse(data); } catch (e) { continue; }
          lane.prepend(el('div', {}, `${new Date(ev.time).toLocaleTimeString()}  `,
            ev.referenceTaskName ? `${ev.referenceTaskName} (${ev.taskType}) ` : 'workflow ', badge(ev.status || ''),
            ev.reason ? el('span', { class: 'reason', text: `  ${ev.reason}` }) : null));
          // one reload for a burst of events
          if (!pending) pending = setTimeout(() => { pending = null; load(); }, 250);
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError') lane.prepend(el('div', { class: 'muted', text: `the status lane stopped: ${e.message}` }));
    }
  }
  await load();
  follow();
  return () => { abort.abort(); clearTimeout(pending); };
}

// ---- queues and daemons ----

async function queuesPage(main) {
  const dbody = el('tbody');
  const qbody = el('tbody');
  const look = el('input', { placeholder: 'a queue by name', id: 'queue-name' });
  const extra = new Set();
  fill(main, el('h1', { text: 'Queues & daemons' }),
    el('h2', { text: 'Daemons' }), el('table', { id: 'daemons' }, el('thead', {}, el('tr', {},
      ['Daemon', 'Host', 'Pid', 'Last seen', 'Serves'].map((t) => el('th', { text: t })))), dbody),
    el('h2', { text: 'Queues' }),
    el('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); if (look.value) extra.add(look.value); refresh(); } },
      look, el('button', { class: 'act', type: 'submit', text: 'Show' })),
    el('table', { id: 'queues' }, el('thead', {}, el('tr', {},
      ['Queue', 'Ready', 'Leased', 'Waiting on limits', 'Limits', 'Last poll'].map((t) => el('th', { text: t })))), qbody));

  // a queue's row: "<domain>:<type>" is the type's queue in that domain
  function queueRow(q) {
    const polled = q.lastPollTime ? `${duration(Date.now() - q.lastPollTime)} ago` : 'none on record';
    return el('tr', { 'data-queue': q.queue, class: q.problem ? 'unpolled' : null },
      el('td', { class: 'mono', text: q.queue }), el('td', { text: q.ready }), el('td', { text: q.leased }),
      el('td', { text: q.waiting || 0 }),
      el('td', { class: 'mono', text: Object.entries(q.limits || {}).map(([n, l]) => `${n}: ${l.held} held, ${l.windowClaims} in window`).join('; ') }),
      el('td', {}, q.problem ? el('span', { class: 'problem', text: q.problem }) : polled));
  }

  async function refresh() {
    try {
      const [daemons, taskdefs, held] = await Promise.all([api('GET', '/api/daemons'),
        api('GET', '/api/metadata/taskdefs').catch(() => []), api('GET', '/api/tasks/queue/sizes').catch(() => ({}))]);
      // every queue holding tasks, whoever serves it (or nobody does)
      const types = new Set([...extra, ...Object.keys(held || {})]);
      fill(dbody, ...Object.entries(daemons || {}).sort().map(([name, d]) => {
        (d.types || []).forEach((t) => { if (t !== 'SIMPLE') types.add(t); });
        const ago = Date.now() - (d.seen || 0);
        return el('tr', { 'data-daemon': name }, el('td', { class: 'mono', text: name }), el('td', { text: d.host || '' }),
          el('td', { text: d.pid || '' }), el('td', { text: `${duration(ago)} ago` }),
          el('td', { text: (d.types || []).join(', ') }));
      }));
      (taskdefs || []).forEach((t) => types.add(t.name));
      const qs = await Promise.all([...types].sort().map((t) => {
        const i = t.indexOf(':');
        const path = i < 0 ? encodeURIComponent(t) : `${encodeURIComponent(t.slice(i + 1))}?domain=${encodeURIComponent(t.slice(0, i))}`;
        return api('GET', `/api/queue/${path}`).catch(() => null);
      }));
      // the queues no worker polls first: they are what an operator must see
      const shown = qs.filter(Boolean).sort((a, b) => !a.problem - !b.problem);
      fill(qbody, ...shown.map(queueRow));
    } catch (e) {
      flash(e.message, true);
    }
  }
  await refresh();
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, 3000);
  return () => clearInterval(timer);
}

// ---- routing ----

let shown = 0; // which route() call shows its page

async function route() {
  const main = document.getElementById('main');
  const h = location.hash || '#/runs';
  const me = ++shown;
  leave();
  leave = () => {};
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('on', h.startsWith(`#/${a.dataset.nav}`)));
  let stop;
  if (h.startsWith('#/run/')) stop = await runPage(main, decodeURIComponent(h.slice(6)));
  else if (h.startsWith('#/queues')) stop = await queuesPage(main);
  else stop = await runsPage(main);
  if (me !== shown) { // another page was asked for meanwhile
    if (stop) stop();
    return;
  }
  leave = stop || (() => {});
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  setupToken();
  route();
});
