// The GraphiQL page of Aether Audit (/graphiql): the sign-in, the fetcher and
// the IDE. Bundled with its libraries into web/graphiql/ by build.mjs.
//
// /graphiql#token=<jwt>&project=<id> opens signed in, as the dashboard does:
// the token is moved to sessionStorage and the fragment is removed from the
// address bar (and from history) before anything else runs. Without a token
// the page shows a sign-in form. Queries and mutations are POSTs to /graphql,
// subscriptions go over one graphql-ws WebSocket (graphql-transport-ws); both
// carry the token as a bearer token, never in a URL.

import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { GraphiQL } from 'graphiql';
import { createClient } from 'graphql-ws';
import { createRoot } from 'react-dom/client';

import 'graphiql/style.css';
import './page.css';

const TOKEN_KEY = 'aether.graphiql.token';
const PROJECT_KEY = 'aether.graphiql.project';

// The style nonce of this response (see index.html). Libraries of the IDE
// (Radix's scroll lock, React Aria) insert <style> elements; they read the
// nonce from this global.
const nonce = document.querySelector('meta[property="csp-nonce"]')?.nonce;
if (nonce) globalThis.__webpack_nonce__ = nonce;

/** Moves token and project from the URL fragment into sessionStorage. */
function takeFragment() {
  if (!location.hash) return;
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get('token');
  const project = params.get('project');
  if (token) sessionStorage.setItem(TOKEN_KEY, token.trim().replace(/^Bearer\s+/i, ''));
  if (project) sessionStorage.setItem(PROJECT_KEY, project.trim());
  if (token || project) history.replaceState(history.state, '', location.pathname + location.search);
}

/** The operations a new tab starts with, for the signed-in project. */
function defaultQuery(project) {
  const p = JSON.stringify(project);
  return `# Aether Audit GraphiQL. Ctrl-Enter (Cmd-Enter) runs the operation under
# the cursor; the Docs button on the left browses the schema. Your token is
# sent as Authorization: Bearer with every operation (not in Headers below).

query RecentEvents {
  auditEvents(projectId: ${p}, first: 10, order: NEWEST_FIRST) {
    edges { node { sequence action outcome occurredAt subject { id } resource { type id } } }
    pageInfo { hasNextPage endCursor }
  }
}

subscription LiveEvents {
  auditEventRecorded(projectId: ${p}) {
    sequence action outcome occurredAt subject { id } resource { type id }
  }
}

mutation RecordEvent {
  recordAuditEvent(input: {
    projectId: ${p}
    action: "graphiql.tried"
    occurredAt: "${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}"
    subject: { type: USER, id: "me" }
    resource: { type: "ide", id: "graphiql" }
    outcome: SUCCESS
  }) { event { sequence action } }
}
`;
}

const byId = (id) => document.getElementById(id);

/**
 * GraphiQL's storage (tabs, history, responses): this browser tab's
 * sessionStorage, like the token. Its clear() (Settings, "Clear storage")
 * removes only GraphiQL's own keys, never the session.
 */
const tabStorage = {
  getItem: (key) => sessionStorage.getItem(key),
  setItem: (key, value) => sessionStorage.setItem(key, value),
  removeItem: (key) => sessionStorage.removeItem(key),
  ownKeys: () => Object.keys(sessionStorage).filter((key) => key.startsWith('graphiql:')),
  get length() {
    return this.ownKeys().length;
  },
  clear() {
    for (const key of this.ownKeys()) sessionStorage.removeItem(key);
  },
};

function main() {
  takeFragment();
  const signIn = byId('sign-in');
  const signInError = byId('sign-in-error');
  const signOutButton = byId('sign-out');
  const mount = byId('graphiql');
  let root = null;
  let wsClient = null;

  const close = () => {
    root?.unmount();
    root = null;
    wsClient?.dispose();
    wsClient = null;
  };

  const signOut = (reason) => {
    close();
    sessionStorage.removeItem(TOKEN_KEY);
    mount.hidden = true;
    signOutButton.hidden = true;
    signIn.hidden = false;
    byId('project-input').value = sessionStorage.getItem(PROJECT_KEY) || byId('project-input').value;
    signInError.textContent = reason ? `${reason} Paste a fresh token.` : '';
    signInError.hidden = !reason;
    byId('token-input').focus();
  };

  const open = () => {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) {
      signOut(null);
      return;
    }
    close();
    const project = sessionStorage.getItem(PROJECT_KEY) || 'demo';
    const authorization = `Bearer ${token}`;
    const wsURL = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/graphql`;
    wsClient = createClient({
      url: wsURL,
      // The server authenticates the socket with connection_init's payload.
      connectionParams: { Authorization: authorization },
      lazy: true,
      retryAttempts: 3,
    });
    // An UNAUTHENTICATED answer (a bad or expired token) ends the session.
    const httpFetch = async (url, init) => {
      const res = await fetch(url, { ...init, credentials: 'omit', cache: 'no-store' });
      if (res.status === 401) {
        const body = await res.clone().json().catch(() => null);
        const message = body?.errors?.[0]?.message || 'the token was refused';
        queueMicrotask(() => signOut(`The server refused the token: ${message}.`));
      }
      return res;
    };
    const fetcher = createGraphiQLFetcher({
      url: '/graphql',
      fetch: httpFetch,
      headers: {
        Accept: 'application/graphql-response+json, application/json',
        Authorization: authorization,
      },
      // The server answers with one JSON response, never multipart.
      enableIncrementalDelivery: false,
      wsClient,
    });
    signIn.hidden = true;
    mount.hidden = false;
    signOutButton.hidden = false;
    document.title = `${project} · Aether Audit GraphiQL`;
    root = createRoot(mount);
    root.render(
      <GraphiQL
        fetcher={fetcher}
        defaultQuery={defaultQuery(project)}
        storage={tabStorage}
        shouldPersistHeaders={false}
      />,
    );
  };

  byId('sign-in-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const data = new FormData(ev.currentTarget);
    const token = String(data.get('token') ?? '').trim().replace(/^Bearer\s+/i, '');
    const project = String(data.get('project') ?? '').trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    if (project) sessionStorage.setItem(PROJECT_KEY, project);
    byId('token-input').value = '';
    open();
  });
  signOutButton.addEventListener('click', () => signOut(null));

  open();
}

main();
