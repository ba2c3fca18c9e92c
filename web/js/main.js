// The dashboard's entry point: the session (bearer token and project, kept in
// sessionStorage), the sign-in form, the view tabs, and the shared GraphQL
// WebSocket.
//
// /dashboard#token=<jwt>&project=<id> opens a project directly: the token is
// moved to sessionStorage and the fragment is removed from the address bar
// (and from history) before anything else runs.

import { ExportsView } from './exports.js';
import { FeedView } from './feed.js';
import { GraphQLWsClient } from './gqlws.js';
import { byId, showError } from './dom.js';
import { VerifyView } from './verify.js';
import { WebhooksView } from './webhooks.js';

const TOKEN_KEY = 'aether.dashboard.token';
const PROJECT_KEY = 'aether.dashboard.project';

/** Moves token and project from the URL fragment into sessionStorage. */
function takeFragment() {
  if (!location.hash) return;
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get('token');
  const project = params.get('project');
  if (token) sessionStorage.setItem(TOKEN_KEY, token.trim());
  if (project) sessionStorage.setItem(PROJECT_KEY, project.trim());
  if (token || project) history.replaceState(history.state, '', location.pathname + location.search);
}

const CONNECTION_TEXT = {
  idle: 'Not connected',
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  failed: 'Disconnected',
  closed: 'Disconnected',
};

/** Wires the tablist (click, arrow keys, Home and End) to the views. */
function setUpTabs(onSelect) {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const select = (tab, focus) => {
    for (const t of tabs) {
      const selected = t === tab;
      t.setAttribute('aria-selected', String(selected));
      t.tabIndex = selected ? 0 : -1;
      byId(t.getAttribute('aria-controls')).hidden = !selected;
    }
    if (focus) tab.focus();
    onSelect(tab.id.replace(/^tab-/, ''));
  };
  for (const tab of tabs) {
    tab.addEventListener('click', () => select(tab, false));
    tab.addEventListener('keydown', (ev) => {
      const i = tabs.indexOf(tab);
      let next = null;
      if (ev.key === 'ArrowRight') next = tabs[(i + 1) % tabs.length];
      else if (ev.key === 'ArrowLeft') next = tabs[(i - 1 + tabs.length) % tabs.length];
      else if (ev.key === 'Home') next = tabs[0];
      else if (ev.key === 'End') next = tabs[tabs.length - 1];
      if (next) {
        ev.preventDefault();
        select(next, true);
      }
    });
  }
  return () => tabs.find((t) => t.getAttribute('aria-selected') === 'true').id.replace(/^tab-/, '');
}

function main() {
  takeFragment();
  const signIn = byId('sign-in');
  const app = byId('app');
  const sessionBar = byId('session');
  const signInError = byId('sign-in-error');
  const connection = byId('connection');

  /** What the views read: the current session and WebSocket client. */
  const ctx = { session: null, ws: null };
  const feed = new FeedView(ctx);
  const webhooks = new WebhooksView(ctx);
  const exportsView = new ExportsView(ctx);
  const verify = new VerifyView(ctx);

  const showView = (name) => {
    if (!ctx.session) return;
    if (name === 'webhooks') webhooks.show();
    else webhooks.hide();
    if (name === 'exports') exportsView.show();
  };
  const currentTab = setUpTabs(showView);

  const stopSession = () => {
    feed.stop();
    webhooks.hide();
    exportsView.stop();
    verify.reset();
    ctx.ws?.close();
    ctx.ws = null;
    ctx.session = null;
  };

  const signOut = (err) => {
    stopSession();
    sessionStorage.removeItem(TOKEN_KEY);
    app.hidden = true;
    sessionBar.hidden = true;
    signIn.hidden = false;
    byId('sign-in-project').value = sessionStorage.getItem(PROJECT_KEY) || byId('sign-in-project').value;
    showError(signInError, err ? { code: err.code, message: `${err.message}. Paste a fresh token.` } : null);
    byId('token-input').focus();
  };

  const open = () => {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const project = sessionStorage.getItem(PROJECT_KEY) || 'demo';
    if (!token) {
      signOut(null);
      return;
    }
    stopSession();
    signIn.hidden = true;
    app.hidden = false;
    sessionBar.hidden = false;
    byId('project-input').value = project;
    document.title = `${project} · Aether Audit dashboard`;
    // An UNAUTHENTICATED answer (bad or expired token) ends the session once.
    const session = { token, project };
    session.onUnauthenticated = (err) => {
      if (ctx.session === session) signOut(err);
    };
    ctx.session = session;
    ctx.ws = new GraphQLWsClient({
      url: `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/graphql`,
      token: () => session.token,
      onState: (state, detail) => {
        connection.dataset.state = state;
        connection.textContent = CONNECTION_TEXT[state] ?? state;
        connection.title = detail || '';
      },
      onFatal: ({ code, reason }) => {
        if (code === 4403) session.onUnauthenticated({ code: 'UNAUTHENTICATED', message: reason });
        else showError(byId('feed-error'), { code: `CLOSE_${code}`, message: reason });
      },
    });
    const tab = currentTab();
    feed.start();
    webhooks.reset();
    exportsView.reset(tab === 'exports');
    showView(tab);
  };

  byId('sign-in-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const data = new FormData(ev.currentTarget);
    const token = String(data.get('token') ?? '').trim().replace(/^Bearer\s+/i, '');
    const project = String(data.get('project') ?? '').trim();
    if (!token || !project) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(PROJECT_KEY, project);
    byId('token-input').value = '';
    showError(signInError, null);
    open();
  });

  byId('project-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const project = byId('project-input').value.trim();
    if (!project) return;
    sessionStorage.setItem(PROJECT_KEY, project);
    open();
  });

  byId('sign-out').addEventListener('click', () => signOut(null));

  // GraphiQL opens in a new tab signed in with this session: the token
  // travels in the fragment of the URL opened on click, never in the link's
  // href (so copying the link copies no token; opened otherwise, GraphiQL
  // asks for one).
  byId('graphiql-link').addEventListener('click', (ev) => {
    if (!ctx.session || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    ev.preventDefault();
    const params = new URLSearchParams({ token: ctx.session.token, project: ctx.session.project });
    window.open(`/graphiql#${params}`, '_blank', 'noopener');
  });

  open();
}

main();
