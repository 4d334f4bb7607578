/*
 * syncpeer dashboard, the browser side of `syncpeer gui`. Lists come from POST /api (one
 * control request each). GET /events (SSE) says what changed: a `transfer` event updates
 * its row in place; any other refetches the lists it touches (one batch per 300 ms at
 * most); `resync` refetches everything, and so does a 10 s safety timer.
 * API text (peer and file names…) is hostile: the DOM is built with createElement and
 * textContent only, never innerHTML. The page loads no other script.
 */
'use strict';

// --- constants ---

/** Transfer states that no longer change by themselves (`failed` can still be resumed). */
const FINISHED = new Set(['completed', 'cancelled', 'declined', 'failed', 'withdrawn']);
const CANCELLABLE = new Set(['preparing', 'offered', 'active', 'finishing', 'paused']);
/** Every list the page shows, by loader name. */
const ALL = ['status', 'folders', 'peers', 'invitations', 'browse', 'transfers', 'conflicts'];
/** The lists an event (other than `transfer`) makes stale; an unknown kind refetches ALL. */
const REFETCH = {
  state: ['peers', 'folders', 'browse'],
  invitation: ['invitations', 'peers'], invitation_closed: ['invitations', 'peers'],
  invitation_pending: ['peers'], paired: ['peers', 'invitations', 'browse'],
  pairing_rejected: ['peers', 'invitations'],
  folder: ['folders', 'conflicts'], file: ['folders', 'conflicts'], share_offer: ['folders'], conflict: ['conflicts', 'folders'],
  offer: ['transfers'], found: ['browse', 'peers'], lost: ['browse', 'peers'],
  refused: ['peers'], error: ['peers', 'transfers', 'folders'], dropped: [], message: [],
  listening: ['status'], registered: ['status'], visibility: ['status', 'browse'],
};
/** The log shows what the daemon keeps (`activity`: its last 1,000 events). A transfer
 * that moves nothing for STALL_MS is "stalled", as the CLI says. */
const LOG_MAX = 1000, FINISHED_MAX = 20, DEBOUNCE_MS = 300, SAFETY_MS = 10000, STALL_MS = 2000;

// --- state ---

const st = {
  gone: false,          // the session ended (HTTP 401/403): everything stops
  node: null,           // the daemon's own `status` (id, name), when it gives one
  folders: null,        // {folders, offers}
  peers: [],
  invitations: [],
  nearby: null,         // `browse` result; null while discovery is off
  conflicts: [],
  transfers: new Map(), // row key -> latest transfer event
  order: new Map(),     // row key -> sequence number (running rows: newest first)
  lastState: new Map(), // row key -> last state seen (the log shows state changes only)
  touched: new Map(),   // row key -> event counter when an event last updated it
  rows: new Map(),      // row key -> its <li>
  moved: new Map(),     // row key of an active transfer -> {bytes, at}: when its bytes last grew
  liveLog: null,        // events the stream logged while `activity` loads (kept on top of it)
  seq: 0,
  events: 0,
  pairing: new Map(),   // address -> {label, peer?, code?}: our pair requests in flight
  busy: new Set(),      // focus keys of buttons whose request is in flight
  es: null,
  poll: 0,
  resynced: false,
};

const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || '';
const $ = (id) => document.getElementById(id);

// --- small helpers ---

const num = (v) => typeof v === 'number' && Number.isFinite(v);
const arr = (v) => (Array.isArray(v) ? v.filter((x) => x && typeof x === 'object') : []);
const str = (v) => (v == null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
const short = (id) => (typeof id === 'string' ? id.slice(0, 7) : '');
/** A value safe to put in a class name. */
const cls = (v) => (typeof v === 'string' && /^[A-Za-z_]+$/.test(v) ? v : 'unknown');
const plural = (n, word) => `${num(n) ? n : '?'} ${word}${n === 1 ? '' : 's'}`;
const validTime = (t) => num(t) && Math.abs(t) < 8.64e15;

function peerName(p) {
  if (typeof p === 'string') return short(p) || 'unknown peer';
  if (p && typeof p.name === 'string' && p.name) return p.name;
  return (p && short(p.id)) || 'unknown peer';
}

/** Bytes in decimal units: "12.3 MB". */
function bytes(n) {
  if (!num(n)) return '?';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(n < 100 ? 1 : 0) : String(Math.round(n))) + ' ' + units[i];
}

/** Seconds as "0:42" or "1:02:03". */
function duration(s) {
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  const pad = (x) => String(x).padStart(2, '0');
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/**
 * Creates an element. props: `class`, `data` (dataset), non-strings as properties
 * (hidden, disabled, value, max), strings as attributes. Children are nodes or strings,
 * nested in arrays at will; strings become text nodes, never HTML.
 */
function el(tag, props, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k === 'data') Object.entries(v).forEach(([dk, dv]) => { n.dataset[dk] = str(dv); });
    else if (typeof v !== 'string' && k in n) n[k] = v;
    else n.setAttribute(k, str(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid != null && kid !== false && kid !== '') n.append(kid instanceof Node ? kid : str(kid));
  }
  return n;
}

/**
 * A name as people read it: control and format characters (bidirectional overrides and
 * isolates such as U+202E, zero-width characters) and line separators written as
 * \u{XXXX}, as the CLI shows them; the JSON keeps the real name.
 */
const shown = (text) => str(text).replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu,
  (c) => '\\u{' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '}');
/** A hostile name, escaped, in its own bidi island, so it cannot reorder the text around it. */
const bdi = (text) => el('bdi', null, shown(text));
const sid = (id) => (short(id) ? el('span', { class: 'sid' }, short(id)) : null);
const empty = (text) => el('li', { class: 'empty' }, text);
/** Joins the non-empty parts with " · ". */
const dots = (...parts) => parts.filter((p) => p != null && p !== '').join(' · ');

/**
 * Replaces a container's children; if a button in it had focus, the new button with the
 * same focus key gets it back (a re-render must not throw keyboard users out).
 */
function fill(box, nodes) {
  const a = document.activeElement;
  const key = a && a !== document.body && box.contains(a) ? a.dataset.fkey : null;
  box.replaceChildren(...nodes.filter(Boolean));
  const again = key && box.querySelector(`[data-fkey="${CSS.escape(key)}"]`);
  if (again) again.focus();
}

// --- the API ---

class ApiError extends Error {
  constructor(message, kind) { super(message); this.kind = kind; }
}

/** Sends one control request; resolves to its `result`, throws an ApiError otherwise. */
async function api(req) {
  return (await apiAnswer(req)).result;
}

/** A list the daemon answers a page at a time: follows `next` (from `req.after`, if given)
 * until the end or until `max` items, so the page never holds an unbounded list. */
async function apiList(req, max = 1000) {
  let items = [], answer = { next: req.after };
  do {
    answer = await apiAnswer(answer.next ? { ...req, after: answer.next } : req);
    items = items.concat(arr(answer.result));
  } while (answer.next && items.length < max);
  return items;
}

/** One request; its whole answer (`result`, and `next` for a list with more pages). */
async function apiAnswer(req) {
  if (st.gone) throw new ApiError('the session has ended', 'session');
  let res, body;
  try {
    res = await fetch('/api', { method: 'POST', credentials: 'same-origin', body: JSON.stringify(req),
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf } });
  } catch (e) {
    throw new ApiError('cannot reach the syncpeer daemon', 'network');
  }
  if (res.status === 401 || res.status === 403) {
    sessionGone();
    throw new ApiError('the session has ended', 'session');
  }
  if (!res.ok) throw new ApiError(`HTTP ${res.status}`, 'http');
  try { body = await res.json(); } catch (e) { throw new ApiError('unreadable answer', 'http'); }
  if (!body || body.ok !== true) {
    throw new ApiError(str(body && body.error) || 'request failed', str(body && body.kind) || 'error');
  }
  return body;
}

/** HTTP 401/403: stop everything and say how to get back in. */
function sessionGone() {
  if (st.gone) return;
  st.gone = true;
  clearInterval(st.poll);
  clearTimeout(flushTimer);
  if (st.es) st.es.close();
  $('session-gone').hidden = false;
  document.body.classList.add('gone');
  setLive('off');
}

let noticeTimer = 0;
/** Shows the outcome of an action; an error says "Error:" in text, not only in colour. */
function notice(text, isError) {
  const n = $('notice');
  n.textContent = (isError ? 'Error: ' : '') + text;
  n.classList.toggle('is-error', !!isError);
  n.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { n.hidden = true; }, isError ? 15000 : 6000);
}

// --- loading lists ---

const LOADERS = {
  async status() {
    // The web contract's status carries folders; the daemon's own describes the node
    // (id, name). Use whichever arrives.
    const r = await api({ op: 'status' });
    if (r && Array.isArray(r.folders)) { st.folders = r; renderFolders(); }
    if (r && typeof r.name === 'string') { st.node = r; renderHeader(); renderDevice(); }
  },
  async folders() {
    // Pages of folders (the first with the first share offers), then the other offers.
    let answer = await apiAnswer({ op: 'folders' });
    const r = answer.result || {};
    const folders = arr(r.folders);
    while (answer.next && folders.length < 1000) {
      answer = await apiAnswer({ op: 'folders', after: answer.next });
      folders.push(...arr(answer.result && answer.result.folders));
    }
    let offers = arr(r.offers);
    if (r.offersNext) offers = offers.concat(await apiList({ op: 'offers', after: r.offersNext }, 200));
    st.folders = { folders, offers };
    renderFolders();
  },
  async peers() { st.peers = await apiList({ op: 'peers' }); renderPeers(); },
  async invitations() { st.invitations = await apiList({ op: 'invitations' }); renderInvitations(); },
  async browse() {
    try {
      st.nearby = await apiList({ op: 'browse' });
    } catch (e) {
      if (e.kind !== 'notFound') throw e;
      st.nearby = null; // discovery is off: hide the nearby list
    }
    renderPeers();
  },
  async transfers() {
    const mark = st.events;
    mergeTransfers(await apiList({ op: 'transfers' }), mark);
    renderTransfers();
  },
  async conflicts() { st.conflicts = await apiList({ op: 'conflicts' }); renderConflicts(); },
  /** The daemon's activity log, newest first; events the stream logs meanwhile stay on top. */
  async activity() {
    const live = [];
    st.liveLog = live;
    let items;
    try { items = await apiList({ op: 'activity' }, LOG_MAX); } finally { if (st.liveLog === live) st.liveLog = null; }
    const kept = new Set(items.map((ev) => JSON.stringify(ev)));
    const log = $('activity-log');
    log.replaceChildren();
    for (const ev of items.slice(0, LOG_MAX).reverse().concat(live.filter((ev) => !kept.has(JSON.stringify(ev))))) {
      const kind = str(ev.type || ev.event);
      logLine(kind === 'transfer' ? transferLine(ev) : eventLine(kind, ev), ev.time);
    }
    if (!log.children.length) log.append(empty('Nothing yet.'));
  },
};

const inflight = new Map(); // loader name -> its promise
const again = new Set();    // loaders asked for while in flight: run once more afterwards

function load(name) {
  if (st.gone || !LOADERS[name]) return Promise.resolve();
  if (inflight.has(name)) { again.add(name); return inflight.get(name); }
  const p = LOADERS[name]()
    .then(() => loadError(name, ''), (e) => { if (e.kind !== 'session') loadError(name, e.message); })
    .finally(() => { inflight.delete(name); if (again.delete(name)) load(name); });
  inflight.set(name, p);
  return p;
}

function loadError(name, message) {
  const n = $('err-' + name);
  if (!n) return;
  n.hidden = !message;
  n.textContent = message ? `Error: could not load ${name}: ${message}` : '';
}

let flushTimer = 0;
const pending = new Set();

/** Refetches these lists soon; requests within 300 ms are merged into one batch. */
function refetch(names) {
  if (!names || !names.length || st.gone) return;
  names.forEach((n) => pending.add(n));
  if (flushTimer) return;
  flushTimer = setTimeout(() => {
    flushTimer = 0;
    const batch = [...pending];
    pending.clear();
    batch.forEach(load);
  }, DEBOUNCE_MS);
}

const refreshAll = () => ALL.forEach(load);

// --- actions ---

/**
 * A button that sends `req` when clicked. `key` names what it acts on, so that the button
 * survives re-renders (focus; disabled while its request is in flight). `subject` ends
 * its accessible name ("Accept" + "the invitation from bob").
 * opts: ok(result), start(), end(), refresh (the lists to refetch afterwards).
 */
function button(label, action, req, key, subject, opts = {}) {
  const k = `${key}|${action}`;
  const b = el('button', { type: 'button', class: action, data: { fkey: k }, disabled: st.busy.has(k), 'aria-label': `${label} ${subject}` }, label);
  b.addEventListener('click', () => act(b, k, req, `${label} ${subject}`, opts));
  return b;
}

async function act(btn, k, req, what, opts) {
  if (st.busy.has(k)) return;
  st.busy.add(k);
  if (btn) btn.disabled = true;
  if (opts.start) opts.start();
  try {
    const r = await api(req);
    if (opts.ok) opts.ok(r);
  } catch (e) {
    if (e.kind !== 'session') {
      notice(`${what} failed: ${e.message}`, true);
      logLine([`Error: ${what} failed: ${e.message}`]);
    }
  } finally {
    st.busy.delete(k);
    if (btn) btn.disabled = false;
    const now = document.querySelector(`[data-fkey="${CSS.escape(k)}"]`);
    if (now) now.disabled = false;
    if (opts.end) opts.end();
    refetch(opts.refresh);
  }
}

/** A pair request can wait a long time for the other side: show it under "Pairing". */
function pairOpts(address, label) {
  return {
    start() { st.pairing.set(address, { label }); renderPairing(); },
    end() { st.pairing.delete(address); renderPairing(); },
    ok(r) { notice(`Paired with ${peerName((r && r.peer) || r)}.`); },
    refresh: ['peers', 'browse', 'invitations'],
  };
}

$('pair-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = $('pair-address');
  const address = input.value.trim();
  if (!address) return;
  input.value = '';
  // The form stays usable while the request waits.
  act(null, `pair:${address}|pair`, { op: 'pair', address }, `Pair with ${address}`, pairOpts(address, address));
});

// --- header and live indicator ---

function renderHeader() {
  const n = st.node;
  $('node-name').textContent = n && n.name ? n.name + (n.id ? ` (${short(n.id)})` : '') : '';
}

/** This device: its name, its whole ID (what a peer pairs with) and whether nearby nodes see it. */
function renderDevice() {
  const n = st.node;
  $('device-name').textContent = str(n.name);
  $('device-id').textContent = str(n.id);
  $('device-receive').textContent = str(n.receiveDir);
  const d = n.discovery || {};
  let text, action = null;
  if (!d.enabled) text = 'discovery is off';
  else if (d.visible) {
    text = 'visible to others' + (d.instance ? ` as '${str(d.instance)}'` : '');
    action = button('Hide from others', 'hide', { op: 'visibility', visible: false }, 'visibility', 'nearby', { refresh: ['status'] });
  } else {
    text = 'invisible to others';
    action = button('Show to others', 'show', { op: 'visibility', visible: true }, 'visibility', 'nearby', { refresh: ['status'] });
  }
  $('device-visibility').textContent = text;
  fill($('device-actions'), [action]);
}

/** A form of a path and a peer: sends `make(path, peer)` and empties the path once it is taken. */
function pathForm(form, input, select, what, make, refresh, ok) {
  $(form).addEventListener('submit', (e) => {
    e.preventDefault();
    const path = $(input).value.trim(), peer = $(select).value;
    if (!path || !peer) return;
    act($(form).querySelector('button'), `${form}|submit`, make(path, peer), `${what} ${path}`,
      { refresh, ok: (r) => { $(input).value = ''; notice(ok(path, r)); } });
  });
}

/** Files dropped into the page (or chosen) go to the daemon whole (at most 16 MB each),
 * which keeps a copy in its home and sends it from there. */
const UPLOAD_MAX = 16 << 20;
async function uploadFile(file) {
  const peer = $('send-peer').value;
  if (!peer) { notice('Pair with a peer first.', true); return; }
  if (file.size > UPLOAD_MAX) { notice(`${file.name} is larger than 16 MB: type its path instead.`, true); return; }
  try {
    const res = await fetch(`/upload?name=${encodeURIComponent(file.name)}&peer=${encodeURIComponent(peer)}`, {
      method: 'POST', credentials: 'same-origin', body: file,
      headers: { 'Content-Type': 'application/octet-stream', 'X-CSRF-Token': csrf } });
    if (res.status === 401 || res.status === 403) { sessionGone(); return; }
    if (!res.ok) throw new ApiError(`HTTP ${res.status}`, 'http');
    const body = await res.json();
    if (!body || body.ok !== true) throw new ApiError(str(body && body.error) || 'request failed', 'error');
    notice(`Sending ${file.name}.`);
    refetch(['transfers']);
  } catch (e) {
    notice(`Send ${file.name} failed: ${e.message}`, true);
    logLine([`Error: send ${file.name} failed: `, bdi(e.message)]);
  }
}
const dropZone = $('send-form');
dropZone.addEventListener('dragover', (e) => { e.preventDefault(); dropZone.classList.add('dropping'); });
dropZone.addEventListener('dragleave', () => dropZone.classList.remove('dropping'));
dropZone.addEventListener('drop', (e) => {
  e.preventDefault();
  dropZone.classList.remove('dropping');
  [...((e.dataTransfer && e.dataTransfer.files) || [])].forEach(uploadFile);
});
$('send-file').addEventListener('change', (e) => { [...e.target.files].forEach(uploadFile); e.target.value = ''; });

$('receive-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const dir = $('receive-dir').value.trim();
  if (!dir) return;
  act($('receive-form').querySelector('button'), 'receive|submit', { op: 'receive-dir', dir }, `Receive into ${dir}`,
    { refresh: ['status'], ok: (r) => { $('receive-dir').value = ''; notice(`Accepted files and folders now go to ${str(r && r.receiveDir)}.`); } });
});

$('rename-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const name = $('rename-name').value.trim();
  if (!name) return;
  act($('rename-form').querySelector('button'), 'rename|submit', { op: 'rename', name }, `Rename this device to ${name}`,
    { refresh: ['status'], ok: (r) => { $('rename-name').value = ''; notice(`This device is now called ${str(r && r.name)}.`); } });
});

pathForm('share-form', 'share-dir', 'share-peer', 'Share', (dir, peer) => ({ op: 'share', dir, peers: [peer] }), ['folders'],
  (path) => `Shared ${path}; the peer is asked to join it.`);
pathForm('send-form', 'send-path', 'send-peer', 'Send', (path, peer) => ({ op: 'send', path, peer, detach: true }), ['transfers'],
  (path) => `Sending ${path}.`);

/** The one editor of a folder's ignore patterns (outside the folder list, which re-renders). */
let editingIgnores = null;
function editIgnores(dir, label, r) {
  editingIgnores = { dir, label };
  $('ignores-for').textContent = label;
  $('ignores-text').value = str(r && r.patterns);
  $('ignores-editor').hidden = false;
  $('ignores-text').focus();
}
$('ignores-cancel').addEventListener('click', () => { $('ignores-editor').hidden = true; editingIgnores = null; });
$('ignores-editor').addEventListener('submit', (e) => {
  e.preventDefault();
  if (!editingIgnores) return;
  const { dir, label } = editingIgnores;
  act($('ignores-editor').querySelector('.ignores-save'), 'ignores|save', { op: 'ignores', dir, patterns: $('ignores-text').value },
    `Save the ignore patterns of ${label}`, { refresh: ['folders'], ok: () => {
      notice(`Saved the ignore patterns of ${label}; it is rescanned with them.`);
      $('ignores-editor').hidden = true;
      editingIgnores = null;
    } });
});

const LIVE_TEXT = { connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…', off: 'offline' };
function setLive(state) {
  $('live').dataset.state = state;
  $('live').textContent = LIVE_TEXT[state];
}

// --- peers and invitations ---

const STATE_TEXT = { connected: 'connected', connecting: 'connecting', notConnected: 'not connected' };

function renderPeers() {
  $('nearby').hidden = st.nearby === null;
  if (st.nearby) fill($('nearby-list'), st.nearby.length ? st.nearby.map(nearbyRow) : [empty('No one nearby.')]);
  const known = st.peers.filter((p) => p.paired || p.state === 'connected');
  fill($('peer-list'), known.length ? known.map(peerRow) : [empty('No paired peers yet.')]);
  const paired = st.peers.filter((p) => p.paired && p.peer && typeof p.peer.id === 'string');
  for (const box of [$('share-peer'), $('send-peer')]) {
    const chosen = box.value;
    fill(box, paired.length ? paired.map((p) => el('option', { value: p.peer.id }, peerName(p.peer)))
      : [el('option', { value: '' }, 'no paired peer yet')]);
    if (paired.some((p) => p.peer.id === chosen)) box.value = chosen;
  }
}

function nearbyRow(n) {
  const p = n.peer || {};
  const name = peerName(p);
  const paired = typeof n.paired === 'boolean' ? n.paired : st.peers.some((x) => x.paired && x.peer && x.peer.id === p.id);
  const address = str(p.id || n.address);
  const instance = typeof n.instance === 'string' && n.instance !== p.name ? 'as ' + n.instance : '';
  return el('li', { class: 'peer', data: { peer: str(p.id) } },
    el('div', { class: 'who' }, el('strong', null, bdi(name)), ' ', sid(p.id)),
    el('div', { class: 'meta' }, dots(instance, str(n.address), paired ? 'paired' : 'not paired')),
    paired || !address ? null : el('div', { class: 'actions' },
      button('Pair', 'pair', { op: 'pair', address }, 'pair:' + address, 'with ' + name, pairOpts(address, name))));
}

function peerRow(s) {
  const p = s.peer || {};
  const name = peerName(p);
  const id = typeof p.id === 'string' ? p.id : '';
  const seen = s.state !== 'connected' && validTime(s.lastSeen) ? 'last seen ' + new Date(s.lastSeen).toLocaleString() : '';
  const refresh = { refresh: ['peers'] };
  let action = null;
  if (id && (s.state === 'connected' || (s.state === 'connecting' && s.paired))) {
    action = button('Disconnect', 'disconnect', { op: 'disconnect', peer: id }, 'peer:' + id, name, refresh);
  } else if (id && s.paired) {
    action = button('Connect', 'connect', { op: 'connect', peer: id }, 'peer:' + id, 'to ' + name, refresh);
  }
  return el('li', { class: 'peer state-' + cls(s.state), data: { peer: id } },
    el('div', { class: 'who' }, el('strong', null, bdi(name)), ' ', sid(id), ' ',
      el('span', { class: 'badge state' }, STATE_TEXT[s.state] || str(s.state) || 'unknown')),
    el('div', { class: 'meta' }, dots(s.paired ? 'paired' : 'not paired', str(s.path || s.address), roundTrip(s), seen,
      s.nearby || s.discovered ? 'nearby' : '')),
    el('div', { class: 'actions' }, action,
      id && s.paired ? [autoAcceptButton(s, 'files', name), autoAcceptButton(s, 'folders', name)] : null));
}

/** A live session's last round trip ("12 ms"), or nothing. */
function roundTrip(s) {
  const ms = s.roundTripMs;
  return s.state === 'connected' && typeof ms === 'number' && isFinite(ms) ? (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + ' ms' : '';
}

/** A switch of `auto-accept PEER files|folders`: its state in words, pressed while on. */
function autoAcceptButton(s, what, name) {
  const on = what === 'files' ? s.autoAccept === true : s.autoAcceptFolders === true;
  const b = button(`Auto-accept ${what}: ${on ? 'on' : 'off'}`, 'auto-' + what,
    { op: 'auto-accept', peer: s.peer.id, what, on: !on }, 'peer:' + s.peer.id, 'from ' + name,
    { refresh: ['peers'], ok: () => notice(`${on ? 'No longer accepting' : 'Accepting'} ${what} from ${name} without asking.`) });
  b.setAttribute('aria-pressed', on ? 'true' : 'false');
  return b;
}

function renderInvitations() {
  const list = st.invitations.filter((i) => i.invitation);
  fill($('invitation-list'), list.length ? list.map(invitationRow) : [empty('No open invitations.')]);
}

/** The code, big, so that people compare it with the other screen before accepting. */
const codeLine = (code) => el('p', { class: 'code-line' }, 'Check that the other screen shows ', el('strong', { class: 'code' }, code));

function invitationRow(inv) {
  const p = inv.peer || {};
  const name = peerName(p);
  const id = str(inv.invitation);
  const subject = 'the invitation from ' + name;
  const refresh = ['invitations', 'peers', 'browse'];
  return el('li', { class: 'invitation', data: { invitation: id } },
    el('p', { class: 'who' }, el('strong', null, bdi(name)), ' ', sid(p.id), ' wants to pair'),
    codeLine(str(inv.code) || '(no code)'),
    inv.context ? el('p', { class: 'meta' }, 'Says: ', bdi(inv.context)) : null,
    inv.address ? el('p', { class: 'meta' }, 'From ' + str(inv.address)) : null,
    el('div', { class: 'actions' },
      button('Accept', 'accept', { op: 'accept', invitation: id }, 'inv:' + id, subject,
        { refresh, ok: (r) => notice(`Paired with ${peerName((r && r.peer) || p)}.`) }),
      button('Decline', 'decline', { op: 'decline', invitation: id }, 'inv:' + id, subject,
        { refresh, ok: () => notice(`Declined ${name}.`) })));
}

/** Our own pair requests, waiting for the other side to accept. */
function renderPairing() {
  const items = [...st.pairing.values()].map((w) => el('li', { class: 'waiting' },
    el('p', null, 'Waiting for ', bdi(w.peer ? peerName(w.peer) : w.label), ' to accept…'),
    w.code ? codeLine(w.code) : null));
  $('pairing').hidden = !items.length;
  fill($('pairing-list'), items);
}

/** `invitation_pending`: the peer we invite now shows the code; attach it to our request. */
function noteCode(ev) {
  const p = ev.peer || {};
  const waits = [...st.pairing.entries()];
  const match = waits.find(([a]) => a === p.name || (a.length >= 4 && str(p.id).startsWith(a)))
    || (waits.length === 1 ? waits[0] : null);
  if (!match) return;
  match[1].peer = p;
  match[1].code = str(ev.code);
  renderPairing();
}

// --- folders and conflicts ---

/** A bar with its percentage written beside it. */
function meter(pct, label, text) {
  pct = num(pct) ? Math.max(0, Math.min(100, Math.floor(pct))) : 0;
  return el('div', { class: 'bar-line' },
    el('progress', { class: 'meter', max: 100, value: pct, 'aria-label': label }, pct + '%'),
    el('span', { class: 'pct' }, pct + '%' + text));
}
/** The one editor of a folder's selection (`select`): the cluster's tree (`tree`), a level at
 * a time, with a checkbox per name. A folder's box is mixed when only some of it is held; its
 * items show once it is opened. Saving sends the smallest list of checked paths: a checked
 * item covers what is below it, and a mixed folder never opened keeps what was selected in it. */
let editingSelection = null;
async function editSelection(dir, label, r) {
  editingSelection = { dir, label, original: arr(r && r.selected).map(str) };
  $('select-for').textContent = label;
  $('select-editor').hidden = false;
  await treeLevel($('select-tree'), '', null);
}
async function treeLevel(list, path, parentBox) {
  fill(list, [empty('Loading…')]);
  const items = await apiList(path ? { op: 'tree', dir: editingSelection.dir, path } : { op: 'tree', dir: editingSelection.dir });
  fill(list, items.length ? items.map((t) => treeRow(t, parentBox)) : [empty('Nothing there.')]);
}
function treeRow(t, parentBox) {
  // Below a box the user set, the items follow it; below an untouched one, the daemon says.
  const inherit = parentBox && !parentBox.indeterminate;
  const box = el('input', { type: 'checkbox', class: 'hold', data: { path: str(t.path) }, 'aria-label': 'hold ' + str(t.path) + ' here' });
  box.checked = inherit ? parentBox.checked : t.selected === 'all';
  box.indeterminate = !inherit && t.selected === 'some';
  const kids = el('ul', { class: 'sub tree' });
  box.addEventListener('change', () => {
    box.indeterminate = false;
    kids.querySelectorAll('input.hold').forEach((c) => { c.checked = box.checked; c.indeterminate = false; });
    mixParents(box);
  });
  let open = null;
  if (t.directory) {
    open = el('button', { type: 'button', class: 'open' }, 'Open');
    open.addEventListener('click', () => {
      open.disabled = true;
      treeLevel(kids, str(t.path), box).catch((e) => notice(`Listing ${str(t.path)} failed: ${e.message}`, true));
    });
  }
  return el('li', null, el('label', null, box, ' ', bdi(str(t.name) + (t.directory ? '/' : '')), ' ',
    el('span', { class: 'meta' }, dots(plural(t.files, 'file'), bytes(t.bytes), bytes(t.localBytes) + ' here'))), ' ', open, kids);
}
/** A folder's box after one of its items changed: checked, unchecked or mixed. */
function mixParents(box) {
  for (let li = box.closest('li').parentElement.closest('li'); li && $('select-tree').contains(li); li = li.parentElement.closest('li')) {
    const own = li.querySelector(':scope > label > input.hold');
    const items = [...li.querySelectorAll(':scope > ul > li > label > input.hold')];
    const all = items.every((c) => c.checked && !c.indeterminate), none = items.every((c) => !c.checked && !c.indeterminate);
    own.checked = all;
    own.indeterminate = !all && !none;
  }
}
function chosenPaths(list) {
  const paths = [];
  for (const li of list.querySelectorAll(':scope > li')) {
    const box = li.querySelector(':scope > label > input.hold');
    if (!box) continue;
    const path = box.dataset.path, kids = li.querySelector(':scope > ul');
    if (box.checked && !box.indeterminate) paths.push(path);
    else if (box.indeterminate && kids.querySelector('input.hold')) paths.push(...chosenPaths(kids));
    else if (box.indeterminate) paths.push(...editingSelection.original.filter((p) => p.startsWith(path + '/')));
  }
  return paths;
}
function saveSelection(paths, button) {
  const { dir, label } = editingSelection;
  act(button, 'select|save', { op: 'select', dir, paths }, `Save the selection of ${label}`, { refresh: ['folders'], ok: (r) => {
    const fetch = r && num(r.neededFiles) && r.neededFiles > 0
      ? ` ${plural(r.neededFiles, 'file')} (${bytes(r.neededBytes)}) to fetch: the folder shows the progress.` : '';
    notice((paths.length ? `${label} holds ${paths.length} item(s) here now; ${plural(r && r.freedFiles, 'file')} freed.`
                         : `${label} is held whole here again.`) + fetch);
    $('select-editor').hidden = true;
    editingSelection = null;
  } });
}
$('select-cancel').addEventListener('click', () => { $('select-editor').hidden = true; editingSelection = null; });
$('select-everything').addEventListener('click', (e) => { if (editingSelection) saveSelection([], e.target); });
$('select-editor').addEventListener('submit', (e) => {
  e.preventDefault();
  if (!editingSelection) return;
  const paths = chosenPaths($('select-tree'));
  if (!paths.length) { notice('Check at least one item, or hold everything.', true); return; }
  saveSelection(paths, $('select-editor').querySelector('.select-save'));
});

function renderFolders() {
  const f = st.folders || {};
  const folders = arr(f.folders), offers = arr(f.offers);
  fill($('folder-list'), folders.length ? folders.map(folderItem) : [empty('No shared folders.')]);
  $('offers').hidden = !offers.length;
  fill($('offer-list'), offers.map(offerRow));
}

/** A member's role in a folder (issue 41): a choice of both, send-only or receive-only, and "no deletes". */
function roleControls(f, m, name) {
  const k = `folder:${str(f.folder)}|role:${str(m.peer.id)}`;
  const what = `role of ${name} in ${str(f.label || f.folder)}`;
  const set = (ctl, change) => act(ctl, k, Object.assign({ op: 'role', dir: str(f.path), peer: str(m.peer.id) }, change), `Set the ${what}`,
    { refresh: ['folders'], ok: () => notice(`The ${what} is set.`) });
  const role = el('select', { 'aria-label': `The ${what}`, data: { fkey: k }, disabled: st.busy.has(k) },
    ['both', 'send-only', 'receive-only'].map((r) => el('option', { value: r, selected: (str(m.role) || 'both') === r }, r)));
  role.addEventListener('change', () => set(role, { role: role.value }));
  const keep = el('input', { type: 'checkbox', checked: m.noDeletes === true, data: { fkey: k }, disabled: st.busy.has(k) });
  keep.addEventListener('change', () => set(keep, { noDeletes: keep.checked }));
  return el('div', { class: 'meta role-controls' }, el('label', null, 'Role ', role), ' ', el('label', null, keep, ' no deletes'));
}

function folderItem(f) {
  const members = arr(f.peers).map((m) => {
    const name = peerName(m.peer);
    const missing = num(m.outOfSyncFiles) && m.outOfSyncFiles > 0
      ? `${plural(m.outOfSyncFiles, 'file')} (${bytes(m.outOfSyncBytes)}) to sync` : '';
    return el('li', null,
      el('div', null, el('strong', null, bdi(name)), ' ', el('span', { class: 'badge' }, m.connected ? 'connected' : 'offline'),
        str(m.role) && m.role !== 'both' ? [' ', el('span', { class: 'badge role' }, str(m.role))] : null,
        m.noDeletes === true ? [' ', el('span', { class: 'badge role' }, 'no deletes')] : null),
      meter(m.percent, `${name} in sync`, ' in sync'),
      f.path && m.peer && str(m.peer.id) ? roleControls(f, m, name) : null,
      el('div', { class: 'meta' }, dots(missing, m.indexReceived === false ? 'waiting for its file list' : '',
        arr(m.holds).length ? `holds only ${arr(m.holds).map(str).join(', ')}` : '')));
  });
  const pulls = arr(f.transfers).map((t) => {
    const pct = num(t.percent) ? t.percent : num(t.needed) && t.needed > 0 ? (100 * t.fetched) / t.needed : 0;
    return el('li', null, el('div', { class: 'name' }, bdi(t.path)), meter(pct, 'Pulling ' + str(t.path), ' of ' + bytes(t.size)));
  });
  const failures = arr(f.failures).map((x) => el('li', null, el('span', { class: 'name' }, bdi(x.path)),
    ' — ', dots(str(x.kind), str(x.reason), x.retry ? 'retry ' + str(x.retry) : '')));
  const failing = num(f.failing) ? f.failing : failures.length;
  const twins = arr(f.normalizationTwinNames).map((p) => el('li', null, el('span', { class: 'name' }, bdi(p))));
  const twinCount = num(f.normalizationTwins) ? f.normalizationTwins : 0;
  // Files whose bytes no longer match the index under an unchanged stamp, found while serving them.
  const damaged = arr(f.damagedPaths).map((p) => el('li', null, el('span', { class: 'name' }, bdi(p))));
  const damagedCount = num(f.damaged) ? f.damaged : 0;
  // Roles (issue 41): ours win at send-only and no-deletes peers, and over a held mass change;
  // receive-only peers' versions come back over our local changes.
  const held = f.massChange && typeof f.massChange === 'object' ? f.massChange : null;
  const overrides = held || arr(f.peers).some((m) => m.role === 'send-only' || m.noDeletes === true);
  const reverts = arr(f.peers).some((m) => m.role === 'receive-only');
  const subject = 'the folder ' + str(f.label || f.folder);
  return el('li', { class: 'folder state-' + cls(f.state), data: { folder: str(f.folder) } },
    el('h3', null, bdi(f.label || f.folder || 'folder')),
    el('p', { class: 'meta' }, el('span', { class: 'badge state' }, str(f.state) || 'unknown'), ' ', bdi(f.path)),
    el('p', { class: 'meta' }, dots(plural(f.files, 'file'), bytes(f.bytes), f.conflicts ? plural(f.conflicts, 'conflict') : '')),
    f.error && !held ? el('p', { class: 'error' }, 'Error: ', bdi(f.error)) : null,
    held ? el('p', { class: 'error question' }, bdi(held.question)) : null,
    num(f.notApplied) && f.notApplied > 0
      ? el('p', { class: 'meta roles not-applied' }, `${plural(f.notApplied, 'remote change')} not applied here (send-only, no deletes)`) : null,
    num(f.locallyChanged) && f.locallyChanged > 0
      ? el('p', { class: 'meta roles locally-changed' }, `${plural(f.locallyChanged, 'path')} locally changed, not sent to receive-only peers`) : null,
    members.length ? [el('h4', null, 'Peers'), el('ul', { class: 'sub' }, members)] : null,
    pulls.length ? [el('h4', null, 'Pulling'), el('ul', { class: 'sub' }, pulls)] : null,
    failing ? [el('h4', null, `${plural(failing, 'path')} cannot be synced now`), el('ul', { class: 'sub' }, failures)] : null,
    twinCount ? [el('h4', null, `${plural(twinCount, 'name')} equal another under Unicode normalization`),
      el('p', { class: 'meta' }, 'Both are kept and synced here; a file system that normalizes names (macOS, Windows) holds only one.'),
      el('ul', { class: 'sub' }, twins)] : null,
    damagedCount ? [el('h4', { class: 'error damaged' }, `${plural(damagedCount, 'file')} damaged on disk, not served`),
      el('p', { class: 'meta' }, 'Their bytes no longer match what was scanned, though size and modification time are unchanged '
        + '(bit rot, or an edit that restored the time). Each is repaired from a peer that has the same version, or reported; '
        + '"syncpeer verify" checks every file.'),
      el('ul', { class: 'sub' }, damaged)] : null,
    f.path ? el('div', { class: 'actions' },
      f.state === 'paused'
        ? button('Resume', 'resume-folder', { op: 'resume-folder', dir: str(f.path) }, 'folder:' + str(f.folder), 'the folder ' + str(f.label || f.folder),
          { refresh: ['folders'], ok: () => notice(`Resumed ${str(f.label || f.path)}: it is scanned and pulls what it missed.`) })
        : button('Pause', 'pause', { op: 'pause', dir: str(f.path) }, 'folder:' + str(f.folder), 'the folder ' + str(f.label || f.folder),
          { refresh: ['folders'], ok: () => notice(`Paused ${str(f.label || f.path)}: nothing is scanned or pulled until you resume it.`) }),
      button('Ignore patterns', 'ignores', { op: 'ignores', dir: str(f.path) }, 'folder:' + str(f.folder), 'of the folder ' + str(f.label || f.folder),
        { ok: (r) => editIgnores(str(f.path), str(f.label || f.path), r) }),
      button('Selection', 'select', { op: 'select', dir: str(f.path) }, 'folder:' + str(f.folder), 'of the folder ' + str(f.label || f.folder),
        { ok: (r) => editSelection(str(f.path), str(f.label || f.path), r).catch((e) => notice(`Selection failed: ${e.message}`, true)) }),
      button('Recently deleted', 'deleted', { op: 'history', path: str(f.path) }, 'folder:' + str(f.folder), 'in the folder ' + str(f.label || f.folder),
        { ok: (r) => showVersions(`Recently deleted in ${str(f.label || f.path)}`, r, (v) => /-delete$/.test(str(v.reason))) }),
      button('Rescan', 'rescan', { op: 'rescan', dir: str(f.path) }, 'folder:' + str(f.folder), 'the folder ' + str(f.label || f.folder),
        { refresh: ['folders'], ok: () => notice(`Rescanning ${str(f.label || f.path)}.`) }),
      held ? button('Apply the changes', 'confirm', { op: 'confirm', dir: str(f.path) }, 'folder:' + str(f.folder), subject,
        { refresh: ['folders'], ok: () => notice(`Applying the peers' changes to ${str(f.label || f.path)}; what they replace or delete is kept as versions.`) }) : null,
      overrides ? button('Keep this folder\'s versions', 'override', { op: 'override', dir: str(f.path) }, 'folder:' + str(f.folder), subject,
        { refresh: ['folders'], ok: (r) => notice(`${plural(r && r.overridden, 'path')} of ${str(f.label || f.path)} sent again with this device's version.`) }) : null,
      reverts ? button('Revert local changes', 'revert', { op: 'revert', dir: str(f.path) }, 'folder:' + str(f.folder), subject,
        { refresh: ['folders'], ok: (r) => notice(`${plural(r && r.reverted, 'local change')} of ${str(f.label || f.path)} reverted (kept under the versions folder).`) }) : null,
      button('Unshare', 'unshare', { op: 'unshare', dir: str(f.path) }, 'folder:' + str(f.folder), 'the folder ' + str(f.label || f.folder),
        { refresh: ['folders'], ok: () => notice(`Unshared ${str(f.label || f.path)}; its files stay on disk.`) })) : null);
}

// --- versions (history, restore, recently deleted) ---

$('history-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const path = $('history-path').value.trim();
  if (!path) return;
  act($('history-form').querySelector('button'), 'history-form|submit', { op: 'history', path }, `History of ${path}`,
    { ok: (r) => showVersions(`History of ${path}`, r, () => true) });
});

/** Lists a `history` answer's versions that `keep` takes (newest first, one per path and
 * content, preferring one whose content is held), each with a Restore button. */
function showVersions(title, r, keep) {
  const folderPath = str(r && r.path);
  const seen = new Map();
  for (const v of arr(r && r.versions)) {
    if (!keep(v)) continue;
    const k = str(v.path) + '\n' + str(v.content);
    const had = seen.get(k);
    if (!had || (!had.held && v.held)) seen.set(k, v);
  }
  const list = [...seen.values()].sort((a, b) => (b.keptAt || 0) - (a.keptAt || 0)).slice(0, 200);
  $('versions-title').textContent = `${title}: ${plural(list.length, 'version')} on this device and ${plural(r.peersAnswered || 0, 'connected peer')}`
    + (r.truncated ? ' (the list stopped at its bound: ask for a narrower path)' : '');
  fill($('version-list'), list.length ? list.map((v) => versionRow(v, folderPath)) : [empty('No versions kept.')]);
}

function versionRow(v, asked) {
  const rel = str(v.path);
  const target = folderRootOf(asked, rel);
  const who = str(v.changedByName || v.changedBy);
  return el('li', { class: 'version', data: { version: str(v.id) } },
    el('p', { class: 'name' }, el('strong', null, bdi(rel))),
    el('p', { class: 'meta' }, dots(bytes(v.size), validTime(v.keptAt) ? 'replaced ' + new Date(v.keptAt).toLocaleString() : '',
      'by ' + who, str(v.reason), v.local ? 'kept here' : 'kept on ' + str(v.deviceName), v.held ? '' : 'content not held')),
    v.held ? el('div', { class: 'actions' }, button('Restore', 'restore', { op: 'restore', path: target + '/' + rel, version: str(v.id) },
      'version:' + str(v.id), rel, { refresh: ['folders'], ok: (res) => notice(arr(res && res.restored).length
        ? `Restored ${rel} from ${str(res.restored[0].from)}; it syncs to every peer.` : `${rel} was not restored.`, !arr(res && res.restored).length) })) : null);
}

/** The folder root a `history` path belongs to: the shared folder whose root is a prefix of it. */
function folderRootOf(asked, rel) {
  const roots = arr(st.folders && st.folders.folders).map((f) => str(f.path)).filter((p) => p && (asked === p || asked.startsWith(p + '/')));
  if (roots.length) return roots.sort((a, b) => b.length - a.length)[0];
  return asked.endsWith('/' + rel) ? asked.slice(0, asked.length - rel.length - 1) : asked;
}

function offerRow(o) {
  const label = str(o.label || o.folder);
  const id = str(o.folder);
  const subject = 'the folder ' + label;
  return el('li', { class: 'offer', data: { folder: id } },
    el('p', null, bdi(peerName(o.peer)), ' offers the folder ', el('strong', null, bdi(label))),
    o.joins ? el('p', { class: 'meta' }, 'It would join ', bdi(o.joins)) : null,
    el('div', { class: 'actions' },
      button('Accept', 'accept', { op: 'accept', folder: id }, 'folder:' + id, subject,
        { refresh: ['folders'], ok: () => notice(`Accepted ${label}.`) }),
      button('Decline', 'decline', { op: 'decline', folder: id }, 'folder:' + id, subject,
        { refresh: ['folders'], ok: () => notice(`Declined ${label}.`) })));
}

function renderConflicts() {
  const list = st.conflicts.filter((c) => c.original && Array.isArray(c.versions));
  fill($('conflict-list'), list.length ? list.map(conflictRow) : [empty('No conflicts.')]);
}

/** Who wrote a version, as a person says it: the peer's name, else its short device ID. */
function author(v) {
  return str(v.name) && v.name !== '?' ? str(v.name) : str(v.device);
}

function conflictRow(c) {
  // One row per conflicted file; one button per device that wrote a version ("Keep alice's"):
  // resolve chooses by author (the device ID, never where the version lies).
  const target = str(c.original);
  const opts = { refresh: ['conflicts', 'folders'], ok: (r) => notice(r && r.versions && r.versions.length
    ? `Resolved ${target}; the other version is kept in ${r.versions.map(str).join(', ')}.` : `Resolved ${target}.`) };
  const versions = c.versions.map((v) => el('li', { class: 'version', data: { device: str(v.device) } },
    el('strong', null, bdi(author(v) + "'s")), v.local ? ' (this device)' : '', ' ',
    dots(bytes(v.size), validTime(v.time) ? new Date(v.time).toLocaleString() : '',
      str(v.path) === target ? 'the file' : str(v.path).split('/').pop())));
  if (c.moreVersions > 0) versions.push(el('li', { class: 'version more' }, `and ${plural(c.moreVersions, 'more version')}`));
  const authors = [];
  for (const v of c.versions) if (!authors.some((a) => a.device === v.device)) authors.push(v);
  const keep = authors.map((v) => button(`Keep ${author(v)}'s`, 'keep-device', { op: 'resolve', path: target, keep: str(v.device) },
    'conflict:' + target + ':' + str(v.device), 'version of ' + target, opts));
  keep.push(button('Keep both', 'keep-both', { op: 'resolve', path: target, keep: 'both' }, 'conflict:' + target, 'versions of ' + target, opts));
  return el('li', { class: 'conflict', data: { path: target } },
    el('p', { class: 'name' }, el('strong', null, bdi(target))),
    el('ul', { class: 'versions' }, versions),
    el('div', { class: 'actions' }, keep));
}

// --- transfers ---

/** A row's key: the transfer ID, or (while a sender prepares, before it has one) who and what. */
function tkey(t) {
  return t.transfer ? 't:' + t.transfer : 'p:' + [t.direction, t.peer && t.peer.id, t.name].map(str).join('\n');
}

const group = (t) => (FINISHED.has(t.state) ? 'finished' : 'running');
const newer = (a, b) => (a.time || 0) > (b.time || 0);

/** Integer percent of bytes/total; 100 once completed. */
function percentOf(t) {
  if (t.state === 'completed') return 100;
  if (!num(t.bytes) || !num(t.total) || t.total <= 0) return 0;
  return Math.max(0, Math.min(100, Math.floor((t.bytes * 100) / t.total)));
}

/** Takes the `transfers` list; keeps rows that events updated while it was on its way. */
function mergeTransfers(list, mark) {
  const next = new Map();
  for (const t of list.slice().reverse()) { // oldest first, so the newest gets the top
    const k = tkey(t);
    const old = st.transfers.get(k);
    const keep = old && newer(old, t) ? old : t;
    next.set(k, keep);
    noteMoved(k, keep);
    if (!st.order.has(k)) st.order.set(k, ++st.seq);
    st.lastState.set(k, keep.state);
  }
  for (const [k, t] of st.transfers) if (!next.has(k) && (st.touched.get(k) || 0) > mark) next.set(k, t);
  st.transfers = next;
  for (const m of [st.order, st.lastState, st.touched, st.moved]) for (const k of m.keys()) if (!next.has(k)) m.delete(k);
}

/** Notes when an active transfer's bytes last grew (the page's clock, as the CLI uses its own). */
function noteMoved(k, t) {
  if (t.state !== 'active') { st.moved.delete(k); return; }
  const m = st.moved.get(k);
  if (!m || m.bytes !== t.bytes) st.moved.set(k, { bytes: t.bytes, at: Date.now() });
}

/** Active, but nothing moved for STALL_MS: the CLI's "stalled" (no rate, no time left). */
function stalled(t) {
  const m = t.state === 'active' && st.moved.get(tkey(t));
  return !!m && Date.now() - m.at >= STALL_MS;
}

/** Rows of active transfers are written again each second: a stall shows without an event. */
function tickTransfers() {
  for (const [k, t] of st.transfers) {
    const row = st.rows.get(k);
    if (t.state === 'active' && row && row.isConnected) fillTransferRow(row, t);
  }
}

/** A live `transfer` event: updates its row in place; re-renders only when rows move. */
function onTransfer(t) {
  if (typeof t.state !== 'string') return;
  st.events++;
  const k = tkey(t);
  let moved = false;
  if (t.transfer) { // the offer replaces the ID-less "preparing" row it came from
    const prep = tkey(Object.assign({}, t, { transfer: null }));
    if (st.transfers.delete(prep)) { moved = true; st.order.set(k, st.order.get(prep) || ++st.seq); }
  }
  const prev = st.transfers.get(k);
  if (prev && newer(prev, t)) return; // a late, out-of-order event
  st.transfers.set(k, t);
  st.touched.set(k, st.events);
  if (!st.order.has(k)) st.order.set(k, ++st.seq);
  if (st.lastState.get(k) !== t.state) { // progress is not logged, state changes are
    st.lastState.set(k, t.state);
    if (st.liveLog) st.liveLog.push(t);
    logLine(transferLine(t), t.time);
  }
  noteMoved(k, t);
  const row = st.rows.get(k);
  if (!moved && row && row.isConnected && row.dataset.group === group(t)) fillTransferRow(row, t);
  else renderTransfers();
}

/** Running transfers first (newest first), then the last 20 finished. */
function renderTransfers() {
  const all = [...st.transfers.entries()];
  const running = all.filter(([, t]) => !FINISHED.has(t.state)).sort((a, b) => st.order.get(b[0]) - st.order.get(a[0]));
  const finished = all.filter(([, t]) => FINISHED.has(t.state))
    .sort((a, b) => (b[1].time || 0) - (a[1].time || 0)).slice(0, FINISHED_MAX);
  st.rows = new Map();
  fill($('running-list'), running.length ? running.map(transferRow) : [empty('Nothing is moving.')]);
  fill($('finished-list'), finished.length ? finished.map(transferRow) : [empty('None yet.')]);
}

function transferRow([k, t]) {
  const span = (c) => el('span', { class: c });
  const row = el('li', { class: 'transfer', data: { transfer: str(t.transfer), group: group(t) } },
    el('div', { class: 't-head' }, el('span', { class: 'dir', 'aria-hidden': 'true' }), ' ',
      el('span', { class: 'who' }, span('to'), ' ', el('bdi', { class: 'tpeer' })), ' ', el('strong', null, el('bdi', { class: 'name' }))),
    el('div', { class: 'bar-line' }, el('progress', { class: 'bar', max: 100, value: 0 }), span('percent')),
    el('div', { class: 't-info' }, span('badge state'), span('size'), span('rate'), span('eta'), span('reason')),
    el('div', { class: 'actions' }));
  st.rows.set(k, row);
  fillTransferRow(row, t);
  return row;
}

/** Writes a transfer event into its row (about 5 times a second while bytes move). */
function fillTransferRow(row, t) {
  const set = (c, text) => { row.querySelector('.' + c).textContent = text; };
  const pct = percentOf(t);
  const send = t.direction === 'send';
  const name = str(t.name) || '(unnamed)';
  const still = stalled(t);
  const active = t.state === 'active' && !still;
  row.className = 'transfer state-' + (still ? 'stalled' : cls(t.state));
  set('dir', send ? '↑' : '↓');
  set('to', send ? 'to' : 'from');
  set('tpeer', shown(peerName(t.peer)));
  set('name', shown(name));
  const bar = row.querySelector('.bar');
  bar.value = pct;
  bar.textContent = pct + '%';
  bar.setAttribute('aria-label', (t.state === 'preparing' ? 'Preparing ' : 'Progress of ') + name);
  set('percent', pct + '%');
  set('state', stateWords(t, still));
  // While preparing, bytes count hashing, not sending.
  const size = num(t.total) ? `${bytes(t.bytes || 0)} of ${bytes(t.total)}` : '';
  set('size', dots(t.state === 'preparing' && size ? 'hashed ' + size : size, t.files > 1 ? plural(t.files, 'file') : ''));
  set('rate', active && num(t.rate) ? bytes(t.rate) + '/s' : '');
  set('eta', active && num(t.eta) ? duration(t.eta) + ' left' : '');
  let reason = str(t.reason);
  if (t.state === 'paused' && !linkLoss(t.reason)) reason = 'paused' + (reason ? ': ' + reason : '');
  else if (t.state === 'completed' && t.path && !reason) reason = 'saved to ' + str(t.path);
  set('reason', reason);
  updateActions(row, t, name);
}

/** A pause that ends by itself when the peer is back (the engine's reasons say so). */
const linkLoss = (r) => typeof r === 'string' && (r.includes('lost') || r.includes('reconnect') || r.startsWith('waiting for'));

/** A transfer's state in the CLI's words (its progress line): stalled, reconnecting…,
 * waiting for bob…, waiting for bob to accept; else the state's name. */
function stateWords(t, still) {
  if (still) return 'stalled';
  const who = peerName(t.peer);
  if (t.state === 'paused' && linkLoss(t.reason)) return num(t.bytes) && t.bytes > 0 ? 'reconnecting…' : `waiting for ${who}…`;
  if (t.state === 'offered' && t.direction === 'send') return `waiting for ${who} to accept`;
  return str(t.state) || 'unknown';
}

/** Rebuilds a row's buttons only when their set changes (so a click in progress survives). */
function updateActions(row, t, name) {
  const id = str(t.transfer);
  const acts = [];
  if (id && t.state === 'offered' && t.direction === 'receive') acts.push(['accept', 'Accept'], ['decline', 'Decline']);
  if (id && (t.state === 'paused' || t.state === 'failed')) acts.push(['resume', 'Resume']);
  if (id && CANCELLABLE.has(t.state)) acts.push(['cancel', 'Cancel']);
  const sig = acts.map((a) => a[0]).join();
  if (row.dataset.actions === sig) return;
  row.dataset.actions = sig;
  fill(row.querySelector('.actions'), acts.map(([op, label]) =>
    button(label, op, { op, transfer: id }, 't:' + id, name, { refresh: ['transfers'] })));
}

const TRANSFER_VERB = { active: 'started' };

/** "report.pdf from alice completed". */
function transferLine(t) {
  const line = [bdi(str(t.name) || '(unnamed)'), t.direction === 'send' ? ' to ' : ' from ', bdi(peerName(t.peer)),
    ' ' + (TRANSFER_VERB[t.state] || str(t.state))];
  if (t.reason && t.state !== 'active' && t.state !== 'completed') line.push(': ', bdi(t.reason));
  return line;
}

// --- activity log ---

/** Prepends a line (strings and nodes); keeps the last 200. */
function logLine(parts, time) {
  const t = validTime(time) ? time : Date.now();
  const log = $('activity-log');
  const placeholder = log.querySelector('.empty');
  if (placeholder) placeholder.remove();
  log.prepend(el('li', null, el('time', { datetime: new Date(t).toISOString() }, new Date(t).toLocaleTimeString()), ' ', parts));
  while (log.children.length > LOG_MAX) log.lastElementChild.remove();
}

/** A node event as a human line, e.g. "alice connected". */
function eventLine(kind, ev) {
  const who = bdi(peerName(ev.peer));
  const why = (v) => (v ? [' (', bdi(v), ')'] : []);
  switch (kind) {
    case 'state':
      if (ev.state === 'connected') return [who, ' connected'];
      if (ev.state === 'connecting') return [who, ' connecting', ev.address ? ' from ' + str(ev.address) : ''];
      return [who, ' disconnected', why(ev.reason)];
    case 'invitation': return [who, ' wants to pair, code ' + str(ev.code)];
    case 'invitation_closed': return ['Invitation from ', who, ' ' + (str(ev.outcome) || 'closed')];
    case 'invitation_pending': return ['Waiting for ', who, ' to accept, code ' + str(ev.code)];
    case 'paired': return ['Paired with ', who, ev.code ? ', code ' + str(ev.code) : ''];
    case 'pairing_rejected': return ['Pairing with ', who, ' ' + (str(ev.outcome) || 'rejected')];
    case 'message': return [who, ': ', bdi(ev.text)];
    case 'refused': return ['Refused ', who, why(ev.reason)];
    case 'error': return ['Error', ev.peer ? [' with ', who] : '', ': ', bdi(ev.reason || ev.error || 'unknown')];
    case 'offer': return [who, ' offers ', bdi(ev.name), ` (${bytes(ev.total)})`];
    case 'share_offer': return [who, ' shares the folder ', bdi(ev.name || ev.label || ev.folder)];
    case 'folder': return ['Folder ', bdi(ev.name || ev.label || ev.folder), ': ' + (str(ev.state) || 'changed'), why(ev.reason)];
    case 'conflict': return ['Conflict in ', bdi(ev.folder), ': ', bdi(ev.copy || ev.path || ev.original)];
    case 'file': return [ev.state === 'failed' ? 'Cannot pull ' : ev.state === 'conflict' ? 'Conflict on ' : ev.state === 'pulled' ? 'Pulled ' : 'Pulling ',
      bdi(ev.path), ' in ', bdi(ev.name || ev.folder), ev.copy ? [' (the other version is ', bdi(ev.copy), ')'] : '', why(ev.reason)];
    case 'found': return ['Found ', who, ' nearby'];
    case 'lost': return [who, ' is no longer nearby'];
    case 'registered': return ['Visible to others as ', bdi(ev.instance), why(ev.reason)];
    case 'visibility': return [ev.state === 'visible' ? 'Visible to others now' : 'Hidden from others now'];
    case 'listening': return ['Listening on ', str(ev.address)];
    default: return ['Event: ' + kind];
  }
}

// --- events (SSE) ---

/** Folder sync's running commentary (`syncpeer events` has it): not logged, as the daemon's
 * activity log does not keep it either; a file that failed or conflicted is. */
function chatter(kind, ev) {
  return (kind === 'file' && (ev.state === 'syncing' || ev.state === 'pulled'))
    || (kind === 'folder' && !ev.reason && ['scanning', 'syncing', 'idle'].includes(ev.state));
}

function handleEvent(ev) {
  if (!ev || typeof ev !== 'object') return;
  const kind = str(ev.type || ev.event); // the web contract names it `type`, the daemon's JSON `event`
  if (kind === 'transfer') return onTransfer(ev);
  if (chatter(kind, ev)) return refetch(REFETCH[kind]);
  if (st.liveLog) st.liveLog.push(ev);
  logLine(eventLine(kind, ev), ev.time);
  if (kind === 'invitation_pending') noteCode(ev);
  refetch(REFETCH[kind] || ALL);
}

function onMessage(e) {
  let ev;
  try { ev = JSON.parse(e.data); } catch (err) { return; }
  try { handleEvent(ev); } catch (err) { console.error('syncpeer: cannot show an event', err); }
}

function connectEvents() {
  if (st.gone) return;
  const es = new EventSource('/events');
  st.es = es;
  es.addEventListener('open', () => {
    setLive('live');  // the stream's first message, `resync`, refetches everything
  });
  es.addEventListener('message', onMessage);
  // Every stream starts with `resync` (the server cannot know what the page missed before
  // it connected); only a later one, after a break, is worth a line in the log.
  es.addEventListener('resync', () => {
    if (st.resynced) logLine(['Reconnected; reloading everything.']);
    st.resynced = true;
    refreshAll();
    load('activity');
  });
  es.addEventListener('error', () => {
    if (st.gone) return;
    setLive('reconnecting');
    if (es.readyState !== EventSource.CLOSED) return; // the browser retries by itself
    // It gave up (an HTTP error such as 401): the API tells whether the session is gone;
    // otherwise open the stream again a little later.
    es.close();
    setTimeout(() => { api({ op: 'status' }).catch(() => {}).finally(connectEvents); }, 3000);
  });
}

// --- start ---

refreshAll();
connectEvents();
st.poll = setInterval(refreshAll, SAFETY_MS);
setInterval(tickTransfers, 1000);
