// The exports view: request an export (after a confirmation), follow its
// progress live (dataExportUpdated), and get a download link when it is READY.

import { confirmAction } from './confirm.js';
import { badge, byId, bytes, h, keepFocus, randomId, shortId, showError, time } from './dom.js';
import { graphql } from './graphql.js';

const EXPORT_FIELDS = `id projectId kind format compression from to state requestedAt startedAt
  progressRows progressBytes contentDigest byteLength rowCount readyAt expiresAt failedAt failureReason expiredAt`;

const LIST_QUERY = `query DashboardExports($p: ID!) {
  dataExports(projectId: $p, first: 20) { edges { node { ${EXPORT_FIELDS} } } }
}`;

const REQUEST = `mutation DashboardRequestExport($in: RequestDataExportInput!) {
  requestDataExport(input: $in) { export { ${EXPORT_FIELDS} } }
}`;

const UPDATES = `subscription DashboardExportUpdates($id: ID!) { dataExportUpdated(exportId: $id) { ${EXPORT_FIELDS} } }`;

const DOWNLOAD = `mutation DashboardDownload($id: ID!) {
  createDataExportDownload(input: { exportId: $id }) { url expiresAt }
}`;

const ACTIVE = new Set(['QUEUED', 'RUNNING']);

/** The exports view; ctx.session and ctx.ws are the current session and socket (see FeedView). */
export class ExportsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.form = byId('export-form');
    this.errorEl = byId('exports-error');
    this.statusEl = byId('exports-status');
    this.body = byId('export-rows');
    /** Exports shown, by id. */
    this.exports = new Map();
    /** Live subscriptions of exports still QUEUED or RUNNING, by id. */
    this.watching = new Map();
    /** Download links minted in this page, by export id. */
    this.links = new Map();
    this.loaded = false;
    this.#setDefaultRange();
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.request();
    });
    byId('exports-refresh').addEventListener('click', () => this.load());
  }

  /** Default range: the last 24 hours up to the next minute. */
  #setDefaultRange() {
    const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 60_000);
    const from = new Date(to.getTime() - 24 * 3600_000);
    byId('x-from').value = toInput(from);
    byId('x-to').value = toInput(to);
  }

  /** Shows the view, loading the list the first time. */
  show() {
    if (!this.loaded) this.load();
  }

  /** Stops every live subscription. */
  stop() {
    for (const unsubscribe of this.watching.values()) unsubscribe();
    this.watching.clear();
  }

  /** Forgets the previous project's exports; reloads when shown. */
  reset(shown) {
    this.stop();
    this.exports.clear();
    this.links.clear();
    this.loaded = false;
    this.statusEl.textContent = '';
    this.body.replaceChildren();
    if (shown) this.load();
  }

  /** Loads the newest exports and follows those still under way. */
  async load() {
    let data;
    try {
      data = await graphql(this.ctx.session, LIST_QUERY, { p: this.ctx.session.project });
    } catch (err) {
      showError(this.errorEl, err);
      return;
    }
    this.loaded = true;
    showError(this.errorEl, null);
    this.exports.clear();
    for (const { node } of data.dataExports.edges) this.#upsert(node);
    this.#render();
  }

  /** Asks for confirmation, then requests the export of the form's range. */
  async request() {
    const data = new FormData(this.form);
    const from = fromInput(String(data.get('from')));
    const to = fromInput(String(data.get('to')));
    if (!from || !to) {
      showError(this.errorEl, { code: 'BAD_USER_INPUT', message: 'give both ends of the range' });
      return;
    }
    const input = {
      projectId: this.ctx.session.project,
      kind: data.get('kind'),
      format: data.get('format'),
      compression: data.get('compression'),
      from: from.toISOString(),
      to: to.toISOString(),
      confirm: true,
      idempotencyKey: randomId(),
    };
    const ok = await confirmAction({
      title: 'Export this data?',
      text: `The ${input.kind.toLowerCase()} history of project ${input.projectId} from ${input.from} to ${input.to} (exclusive) is written to a ${input.format}${input.compression === 'GZIP' ? ' (gzip)' : ''} file that anyone with its download link can read. The request is audited.`,
      confirmLabel: 'Request export',
    });
    if (!ok) return;
    try {
      const res = await graphql(this.ctx.session, REQUEST, { in: input });
      const x = res.requestDataExport.export;
      showError(this.errorEl, null);
      this.statusEl.textContent = `Export ${x.id.slice(0, 8)} requested: ${x.state}.`;
      this.#upsert(x);
      this.#render();
    } catch (err) {
      showError(this.errorEl, err);
    }
  }

  /** Stores an export's latest state and follows it while it is under way. */
  #upsert(x) {
    const before = this.exports.get(x.id);
    this.exports.set(x.id, x);
    if (before && before.state !== x.state) this.statusEl.textContent = `Export ${x.id.slice(0, 8)} is ${x.state}.`;
    if (ACTIVE.has(x.state) && !this.watching.has(x.id)) {
      const unsubscribe = this.ctx.ws.subscribe(() => ({ query: UPDATES, variables: { id: x.id } }), {
        next: (result) => {
          if (result.errors?.length) {
            showError(this.errorEl, { code: result.errors[0].extensions?.code, message: result.errors[0].message });
            return;
          }
          const updated = result.data.dataExportUpdated;
          this.#upsert(updated);
          this.#render();
        },
        error: (errors) => {
          this.watching.delete(x.id);
          showError(this.errorEl, { code: errors?.[0]?.extensions?.code, message: errors?.[0]?.message ?? 'export updates stopped' });
        },
        complete: () => this.watching.delete(x.id),
      });
      this.watching.set(x.id, unsubscribe);
    } else if (!ACTIVE.has(x.state) && this.watching.has(x.id)) {
      this.watching.get(x.id)();
      this.watching.delete(x.id);
    }
  }

  #render() {
    const list = [...this.exports.values()].sort((a, b) => (a.requestedAt < b.requestedAt ? 1 : -1));
    keepFocus(this.body, () => {
      if (!list.length) {
        this.body.replaceChildren(h('tr', { class: 'empty' }, h('td', { colspan: 7 }, 'No exports yet.')));
        return;
      }
      this.body.replaceChildren(...list.map((x) => this.#row(x)));
    });
  }

  #row(x) {
    let progress;
    if (x.state === 'READY') progress = `${x.rowCount} rows, ${bytes(x.byteLength)}`;
    else if (x.state === 'FAILED') progress = x.failureReason || 'failed';
    else progress = `${x.progressRows} rows, ${bytes(x.progressBytes)}`;
    let download = '—';
    const link = this.links.get(x.id);
    if (x.state === 'READY' && link && new Date(link.expiresAt) > new Date()) {
      download = h('span', {},
        h('a', { href: link.url, download: '', rel: 'noreferrer', dataset: { focusKey: `link-${x.id}`, role: 'download-link' } }, 'Download file'),
        h('span', { class: 'meta' }, ' (link valid until ', time(link.expiresAt), ')'));
    } else if (x.state === 'READY') {
      download = h('button', {
        type: 'button',
        dataset: { focusKey: `dl-${x.id}`, action: 'download' },
        'aria-label': `Create a download link for export ${x.id.slice(0, 8)}`,
        onClick: () => this.download(x),
      }, 'Get download link');
    }
    return h(
      'tr',
      { dataset: { exportId: x.id, state: x.state } },
      h('td', {}, shortId(x.id)),
      h('td', {}, x.kind),
      h('td', {}, time(x.from), ' – ', time(x.to)),
      h('td', {}, `${x.format}${x.compression === 'GZIP' ? ' + gzip' : ''}`),
      h('td', {}, badge(x.state)),
      h('td', {}, progress, x.contentDigest ? h('div', { class: 'meta mono', title: x.contentDigest }, x.contentDigest.slice(0, 19) + '…') : null),
      h('td', {}, download),
    );
  }

  /** Mints a short-lived download link and shows it in place of the button. */
  async download(x) {
    try {
      const data = await graphql(this.ctx.session, DOWNLOAD, { id: x.id });
      this.links.set(x.id, data.createDataExportDownload);
      showError(this.errorEl, null);
      this.statusEl.textContent = 'Download link ready.';
    } catch (err) {
      showError(this.errorEl, err);
      return;
    }
    this.#render();
    this.body.querySelector(`[data-focus-key="link-${CSS.escape(x.id)}"]`)?.focus();
  }
}

/** A Date as a datetime-local value in UTC (the form's fields are UTC). */
function toInput(d) {
  return d.toISOString().slice(0, 19);
}

/** A datetime-local value read as UTC, or null. */
function fromInput(v) {
  if (!v) return null;
  const d = new Date(`${v.length === 16 ? `${v}:00` : v}Z`);
  return Number.isNaN(d.getTime()) ? null : d;
}
