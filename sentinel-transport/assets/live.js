(() => {
  'use strict';

  const REFRESH_MS = 1000;
  const TIMEOUT_MS = 4000;
  const LIMIT = 100;
  // Adaptive limits kept for the chart: one a poll, within its minute.
  const LIMIT_POINTS = 120;

  const pageParams = new URLSearchParams(location.search);
  // A read token in the page's URL goes on to every request of the page.
  const token = pageParams.get('token');
  const state = {
    selected: pageParams.get('resource') || null,
    // Following the busiest resource, until one is chosen.
    following: !pageParams.get('resource'),
    filter: '',
    data: null,
    hover: null,
    // The charted resource's adaptive limits and calls in flight, one
    // point per answer since the page opened (the data carries only the
    // state now).
    limits: { resource: null, points: [] },
  };

  const $ = (id) => document.getElementById(id);
  const fmt = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
  const fmt2 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
  const int = (n) => fmt.format(n);
  const ms = (n) => (n === null || n === undefined ? '–' : fmt2.format(n) + ' ms');
  const clock = (t) => new Date(t).toLocaleTimeString(undefined, { hour12: false });

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function dataUrl() {
    const q = new URLSearchParams();
    if (state.selected) q.set('resource', state.selected);
    if (state.filter) q.set('q', state.filter);
    q.set('limit', String(LIMIT));
    if (token) q.set('token', token);
    return 'live/data?' + q.toString();
  }

  function setStatus(kind, text) {
    $('status').dataset.state = kind;
    $('status-text').textContent = text;
    // What is on screen is from the last good answer: dim it meanwhile.
    document.body.classList.toggle('stale', kind === 'down');
  }

  async function poll() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
    try {
      const response = await fetch(dataUrl(), { cache: 'no-store', signal: abort.signal });
      if (!response.ok) {
        const why = (await response.text()).trim().split('\n')[0];
        setStatus('down', 'error ' + response.status + (why ? ': ' + why : ''));
      } else {
        const data = await response.json();
        state.data = data;
        recordLimits(data);
        render(data);
        setStatus('live', 'live · second ' + clock(data.second.start_ms));
      }
    } catch (error) {
      setStatus('down', 'disconnected, retrying…');
    } finally {
      clearTimeout(timer);
      setTimeout(poll, REFRESH_MS);
    }
  }

  // Adds the charted resource's adaptive state now to its series; a new
  // resource starts a new one, and a resource without an adaptive rule has
  // none.
  function recordLimits(data) {
    const h = data.history;
    const series = state.limits;
    if (!h) return;
    if (series.resource !== h.resource) {
      series.resource = h.resource;
      series.points = [];
    }
    const rules = h.adaptive || [];
    if (!rules.length) {
      series.points = [];
      return;
    }
    const point = {
      t: data.now_ms,
      limit: rules.map((a) => a.limit),
      inFlight: rules.map((a) => a.in_flight),
    };
    const last = series.points[series.points.length - 1];
    if (last && last.t >= point.t) series.points.pop();
    series.points.push(point);
    series.points = series.points.filter((p) => p.t >= h.start_ms).slice(-LIMIT_POINTS);
  }

  function render(data) {
    const t = data.totals;
    $('t-pass').textContent = int(t.pass);
    $('t-block').textContent = int(t.block);
    $('t-success').textContent = int(t.success);
    $('t-exception').textContent = int(t.exception);
    $('t-concurrency').textContent = int(t.concurrency);
    $('t-resources').textContent = int(t.resources);
    $('t-listed').textContent = t.resources === 1 ? 'known' : 'known, ' + int(t.shown) + ' listed';
    // Until the user picks one, chart the busiest resource; switch only
    // when another is more than twice as busy, so that the chart does not
    // flap between two resources of about the same traffic.
    if (state.following && data.resources.length > 0) {
      const top = data.resources[0];
      const current = data.resources.find((r) => r.name === state.selected);
      const busy = (r) => (r ? r.pass + r.block : 0);
      if (!current || (top.name !== state.selected && busy(top) > 2 * busy(current))) {
        state.selected = top.name;
        poll.now();
      }
    }
    renderTable(data);
    renderChart();
    renderBreakers(data.breakers);
    renderRules(data.rules);
    renderSources(data.sources || []);
  }

  function cell(row, cls, value, text) {
    const td = el('td', cls + (value === 0 ? ' zero' : ''), text);
    row.appendChild(td);
    return td;
  }

  function renderTable(data) {
    const t = data.totals;
    const body = document.querySelector('#resources tbody');
    const rows = document.createDocumentFragment();
    for (const r of data.resources) {
      const tr = el('tr');
      tr.dataset.name = r.name;
      tr.tabIndex = 0;
      if (r.name === state.selected) tr.className = 'selected';
      const name = el('td', 'name', r.name);
      name.title = r.name;
      tr.appendChild(name);
      const pass = cell(tr, 'pass', r.pass, int(r.pass));
      if (r.pass + r.block > 0) {
        const bar = el('span', 'ratio' + (r.block > 0 ? ' some-block' : ''));
        const fill = el('i');
        fill.style.width = (100 * r.pass / (r.pass + r.block)).toFixed(1) + '%';
        bar.appendChild(fill);
        pass.appendChild(bar);
      }
      cell(tr, 'block', r.block, int(r.block));
      cell(tr, '', r.success, int(r.success));
      cell(tr, 'exception', r.exception, int(r.exception));
      cell(tr, '', r.avg_rt === null ? 0 : 1, ms(r.avg_rt));
      cell(tr, '', r.min_rt === null ? 0 : 1, ms(r.min_rt));
      cell(tr, '', r.concurrency, int(r.concurrency));
      const rules = el('td', 'name');
      const badges = el('span', 'badges');
      for (const [kind, label] of [['flow', 'flow'], ['degrade', 'breaker'], ['param_flow', 'param'], ['authority', 'auth']]) {
        const n = r.rules[kind];
        if (n > 0) badges.appendChild(el('span', 'badge', n > 1 ? label + ' ×' + n : label));
      }
      for (const a of r.adaptive || []) {
        const badge = el('span', 'badge adaptive', 'adaptive ' + int(a.in_flight) + '/' + int(a.limit));
        badge.title = a.algorithm + ' (' + a.limit_app + '): ' + int(a.in_flight) + ' in flight of a limit of '
          + int(a.limit) + ', last RTT ' + ms(a.last_rtt_ms) + ', reference RTT ' + ms(a.reference_rtt_ms);
        badges.appendChild(badge);
      }
      if (r.breaker && r.breaker !== 'closed') {
        badges.appendChild(el('span', 'badge ' + r.breaker, r.breaker.replace('_', '-')));
      }
      rules.appendChild(badges);
      tr.appendChild(rules);
      rows.appendChild(tr);
    }
    body.replaceChildren(rows);
    $('empty').hidden = data.resources.length > 0;
    $('empty').textContent = state.filter
      ? 'No resource matches “' + state.filter + '”.'
      : 'No resource yet: each appears here from its first entry.';
    $('shown-note').textContent = t.shown < t.matched
      ? '· busiest ' + int(t.shown) + ' of ' + int(t.matched)
      : '· ' + int(t.matched) + (state.filter ? ' matching' : '');
  }

  const tbody = document.querySelector('#resources tbody');
  tbody.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      event.target.click();
    }
  });
  tbody.addEventListener('click', (event) => {
    const tr = event.target.closest('tr');
    if (!tr) return;
    state.selected = tr.dataset.name;
    state.following = false;
    for (const row of tr.parentNode.children) row.classList.toggle('selected', row === tr);
    poll.now();
  });

  let filterTimer = 0;
  $('filter').addEventListener('input', (event) => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => {
      state.filter = event.target.value.trim();
      poll.now();
    }, 250);
  });

  // ---- chart ----

  function css(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function niceMax(value) {
    if (value <= 0) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10]) {
      if (value <= step * power) return step * power;
    }
    return 10 * power;
  }

  function renderChart() {
    const canvas = $('chart');
    const h = state.data && state.data.history;
    $('chart-title').textContent = state.selected || '–';
    const box = canvas.getBoundingClientRect();
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(1, Math.round(box.width));
    const height = Math.max(1, Math.round(box.height));
    if (canvas.width !== width * ratio || canvas.height !== height * ratio) {
      canvas.width = width * ratio;
      canvas.height = height * ratio;
    }
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = '12px system-ui, sans-serif';
    const muted = css('--muted');
    const line = css('--line');
    if (!h) {
      g.fillStyle = muted;
      g.textAlign = 'center';
      g.fillText(state.selected ? 'no data for this resource' : 'waiting for traffic…', width / 2, height / 2);
      canvas.dataset.drawn = '0';
      canvas.dataset.limit = '';
      canvas.dataset.limitPoints = '0';
      $('legend-limit').hidden = true;
      $('legend-in-flight').hidden = true;
      return;
    }
    // The adaptive limits share the left axis: they are counts too (calls
    // at once rather than per second).
    const limitPoints = state.limits.resource === h.resource ? state.limits.points : [];
    $('legend-limit').hidden = !limitPoints.length;
    $('legend-in-flight').hidden = !limitPoints.length;
    const limitMax = Math.max(0, ...limitPoints.map((p) => Math.max(...p.limit, ...p.inFlight)));
    const pad = { left: 48, right: 52, top: 10, bottom: 26 };
    const w = width - pad.left - pad.right;
    const ht = height - pad.top - pad.bottom;
    const n = h.pass.length;
    // Headroom above the highest point, so a saturated rule's flat line
    // does not sit on the frame.
    const maxCount = niceMax(1.1 * Math.max(limitMax, ...h.pass.map((p, i) => p + h.block[i])));
    const rts = h.avg_rt.filter((v) => v !== null);
    const maxRt = niceMax(Math.max(1, 1.1 * (rts.length ? Math.max(...rts) : 0)));
    const x = (i) => pad.left + (n <= 1 ? 0 : (w * i) / (n - 1));
    const y = (v) => pad.top + ht - (ht * v) / maxCount;
    const yRt = (v) => pad.top + ht - (ht * v) / maxRt;

    g.lineWidth = 1;
    g.textBaseline = 'middle';
    for (let k = 0; k <= 4; k++) {
      const v = (maxCount * k) / 4;
      const py = Math.round(y(v)) + 0.5;
      g.strokeStyle = line;
      g.beginPath(); g.moveTo(pad.left, py); g.lineTo(pad.left + w, py); g.stroke();
      g.fillStyle = muted;
      g.textAlign = 'right';
      g.fillText(fmt2.format(v), pad.left - 8, py);
      if (rts.length) {
        g.textAlign = 'left';
        g.fillText(fmt2.format((maxRt * k) / 4), pad.left + w + 8, py);
      }
    }
    g.textBaseline = 'alphabetic';
    g.textAlign = 'center';
    // Time labels every 15 s, or 30 s on a narrow chart; the last second
    // is labelled at the right edge unless that would overlap.
    const every = w < 480 ? 30 : 15;
    const labelWidth = g.measureText('00:00:00').width + 12;
    let lastLabel = -Infinity;
    for (let i = 0; i < n; i += every) {
      g.fillText(clock(h.start_ms + i * h.step_ms), x(i), height - 6);
      lastLabel = x(i);
    }
    if (x(n - 1) - lastLabel >= 1.5 * labelWidth) {
      g.textAlign = 'right';
      g.fillText(clock(h.start_ms + (n - 1) * h.step_ms), x(n - 1), height - 6);
    }

    // Block is stacked on pass: the top line is every request that came,
    // the red band what was refused of it.
    const total = h.pass.map((p, i) => p + h.block[i]);
    const band = (upper, lower, color) => {
      const top = new Path2D();
      upper.forEach((v, i) => (i === 0 ? top.moveTo(x(i), y(v)) : top.lineTo(x(i), y(v))));
      const area = new Path2D(top);
      for (let i = n - 1; i >= 0; i--) area.lineTo(x(i), y(lower ? lower[i] : 0));
      area.closePath();
      g.globalAlpha = 0.16; g.fillStyle = color; g.fill(area); g.globalAlpha = 1;
      g.strokeStyle = color; g.lineWidth = 2; g.lineJoin = 'round'; g.stroke(top);
    };
    band(total, h.pass, css('--block'));
    band(h.pass, null, css('--pass'));
    if (rts.length) {
      g.strokeStyle = css('--rt'); g.lineWidth = 1.5; g.setLineDash([4, 3]);
      g.beginPath();
      let open = false;
      h.avg_rt.forEach((v, i) => {
        if (v === null) { open = false; return; }
        if (open) g.lineTo(x(i), yRt(v)); else g.moveTo(x(i), yRt(v));
        open = true;
      });
      g.stroke(); g.setLineDash([]);
    }
    // A point is the state when its answer was computed, in the second
    // after that answer's last completed one: it is drawn over the second
    // before it, so that the latest ends at the chart's right edge.
    const xAt = (t) => x(Math.min(n - 1, Math.max(0, (t - h.start_ms) / h.step_ms - 1)));
    const stepWidth = w / Math.max(1, n - 1);
    const rulesDrawn = limitPoints.length ? limitPoints[limitPoints.length - 1].limit.length : 0;
    const limitColor = css('--limit');
    for (let k = 0; k < rulesDrawn; k++) {
      for (const [field, width, dash] of [['limit', 2, []], ['inFlight', 1.25, [2, 3]]]) {
        const pts = limitPoints.filter((p) => p[field].length > k);
        if (!pts.length) continue;
        g.strokeStyle = limitColor; g.lineWidth = width; g.setLineDash(dash);
        g.beginPath();
        // Steps: each value held over its second.
        pts.forEach((p, i) => {
          const x1 = xAt(p.t);
          const x0 = Math.max(pad.left, x1 - stepWidth);
          const py = y(p[field][k]);
          if (i === 0) g.moveTo(x0, py); else g.lineTo(x0, py);
          g.lineTo(x1, py);
        });
        g.stroke();
      }
    }
    g.setLineDash([]);
    if (state.hover !== null && state.hover < n) {
      const hx = Math.round(x(state.hover)) + 0.5;
      g.strokeStyle = muted; g.lineWidth = 1;
      g.beginPath(); g.moveTo(hx, pad.top); g.lineTo(hx, pad.top + ht); g.stroke();
    }
    canvas.dataset.drawn = String(n);
    canvas.dataset.maxPass = String(Math.max(...h.pass));
    const lastLimit = limitPoints[limitPoints.length - 1];
    canvas.dataset.limit = lastLimit ? String(lastLimit.limit[0]) : '';
    canvas.dataset.inFlight = lastLimit ? String(lastLimit.inFlight[0]) : '';
    canvas.dataset.limitPoints = String(limitPoints.length);
    chartGeometry = { x0: pad.left, w, n };
    renderTip();
  }

  let chartGeometry = null;
  function renderTip() {
    const tip = $('tip');
    const h = state.data && state.data.history;
    if (!h || state.hover === null || !chartGeometry) { tip.hidden = true; return; }
    const i = state.hover;
    tip.replaceChildren(
      el('b', '', clock(h.start_ms + i * h.step_ms)), el('br'),
      document.createTextNode('pass ' + int(h.pass[i]) + ' · block ' + int(h.block[i])), el('br'),
      document.createTextNode('errors ' + int(h.exception[i]) + ' · RT ' + ms(h.avg_rt[i])));
    // The adaptive state last read within that second, if any.
    const second = h.start_ms + i * h.step_ms;
    const seen = state.limits.resource === h.resource
      ? state.limits.points.filter((p) => p.t >= second && p.t < second + 2 * h.step_ms) : [];
    if (seen.length) {
      const p = seen[0];
      tip.appendChild(el('br'));
      tip.appendChild(document.createTextNode('limit ' + p.limit.map(int).join(', ')
        + ' · in flight ' + p.inFlight.map(int).join(', ')));
    }
    tip.hidden = false;
    const px = chartGeometry.x0 + (chartGeometry.w * i) / Math.max(1, chartGeometry.n - 1);
    const left = px > chartGeometry.x0 + chartGeometry.w / 2 ? px - tip.offsetWidth - 12 : px + 12;
    tip.style.left = left + 'px';
    tip.style.top = '12px';
  }

  $('chart').addEventListener('mousemove', (event) => {
    if (!chartGeometry) return;
    const box = event.currentTarget.getBoundingClientRect();
    const rel = (event.clientX - box.left - chartGeometry.x0) / chartGeometry.w;
    const i = Math.round(rel * (chartGeometry.n - 1));
    state.hover = i >= 0 && i < chartGeometry.n ? i : null;
    renderChart();
  });
  $('chart').addEventListener('mouseleave', () => { state.hover = null; renderChart(); });
  window.addEventListener('resize', () => renderChart());

  // ---- breakers and rules ----

  function renderBreakers(breakers) {
    const list = $('breakers');
    $('breaker-count').textContent = breakers.length ? '· ' + breakers.length : '';
    if (!breakers.length) {
      list.replaceChildren(el('p', 'none', 'No degrade rule: no breaker.'));
      return;
    }
    const order = { open: 0, half_open: 1, closed: 2 };
    const sorted = [...breakers].sort((a, b) => order[a.state] - order[b.state] || a.resource.localeCompare(b.resource));
    list.replaceChildren(...sorted.map((b) => {
      const li = el('li');
      li.appendChild(el('span', 'state ' + b.state, b.state.replace('_', '-')));
      const res = el('span', 'res', b.resource);
      res.title = b.resource;
      li.appendChild(res);
      let when = '';
      if (b.state === 'open' && b.retry_in_ms !== null) when = 'probe in ' + fmt2.format(b.retry_in_ms / 1000) + ' s';
      if (b.state === 'half_open') when = b.probes_passed + '/' + b.probes_admitted + ' probes passed';
      li.appendChild(el('span', 'muted', when));
      li.appendChild(el('span', 'why', 'trips on ' + b.trips_on));
      li.appendChild(el('span', 'window', int(b.window_bad) + ' bad of ' + int(b.window_total) + ' in the window'));
      return li;
    }));
  }

  const KINDS = [
    ['flow', 'Flow'], ['degrade', 'Circuit breaking'], ['param_flow', 'Hot parameters'],
    ['authority', 'Authority'], ['system', 'System'], ['adaptive', 'Adaptive concurrency'],
  ];

  function renderRules(rules) {
    const box = $('rules');
    const parts = [];
    let total = 0;
    for (const [kind, title] of KINDS) {
      const set = rules[kind];
      if (!set) continue;
      total += set.total;
      if (!set.total) continue;
      parts.push(el('h3', '', title + ' · ' + set.total));
      const ul = el('ul');
      for (const rule of set.items) {
        const li = el('li');
        const head = el('div', 'head');
        head.appendChild(el('span', 'res', rule.resource));
        head.appendChild(el('span', 'limit', rule.headline));
        li.appendChild(head);
        const details = el('div', 'details');
        for (const d of rule.details) details.appendChild(el('span', '', d));
        li.appendChild(details);
        ul.appendChild(li);
      }
      if (set.items.length < set.total) ul.appendChild(el('p', 'none', '… and ' + (set.total - set.items.length) + ' more'));
      parts.push(ul);
    }
    $('rule-count').textContent = total ? '· ' + total : '';
    if (!parts.length) parts.push(el('p', 'none', 'No rule in force.'));
    box.replaceChildren(...parts);
  }

  // ---- rule sources ----

  function renderSources(sources) {
    const card = $('sources-card');
    card.hidden = !sources.length;
    $('source-count').textContent = sources.length ? '· ' + sources.length : '';
    $('sources').replaceChildren(...sources.map((s) => {
      const li = el('li');
      const up = s.connected ? 'connected' : 'down';
      li.appendChild(el('span', 'state ' + (s.connected ? 'closed' : 'open'), up));
      const name = el('span', 'res', s.name);
      name.title = s.name;
      li.appendChild(name);
      li.appendChild(el('span', 'muted', s.from_last_known_good ? 'from the last-known-good copy' : ''));
      const applied = s.applied_at_ms === null ? 'nothing applied yet'
        : 'revision ' + (s.revision || '–') + ' applied ' + new Date(s.applied_at_ms).toISOString();
      li.appendChild(el('span', 'why', applied));
      li.appendChild(el('span', 'window', int(s.applies) + ' applied · ' + int(s.refusals) + ' refused · '
        + int(s.disconnects) + ' lost'));
      if (s.last_error !== null) li.appendChild(el('span', 'error', s.last_error));
      return li;
    }));
  }

  // A click or a new filter asks at once; the regular poll goes on.
  poll.now = () => {
    fetch(dataUrl(), { cache: 'no-store' })
      .then((r) => (r.ok ? r.json() : null))
      .then((data) => { if (data) { state.data = data; recordLimits(data); render(data); } })
      .catch(() => setStatus('down', 'disconnected, retrying…'));
  };

  poll();
})();
