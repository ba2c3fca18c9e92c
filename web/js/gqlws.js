// A small client of the graphql-transport-ws protocol (GraphQL over
// WebSocket): connection_init with the bearer token, subscribe / next /
// error / complete, ping -> pong, and reconnection with exponential backoff.
// Each subscription's payload is a function, called again on every
// (re)subscribe, so that a feed can resume from the last sequence it saw.

const PROTOCOL = 'graphql-transport-ws';

/** Close codes after which reconnecting cannot help (see docs/live.md). */
const FATAL_CLOSE = new Map([
  [1009, 'a message was too large for the server'],
  [4400, 'the server refused a message of this client'],
  [4401, 'the server saw a subscription before the connection was acknowledged'],
  [4403, 'the token was refused (missing, invalid or expired)'],
  [4409, 'an operation id was used twice'],
]);

/**
 * One WebSocket to /graphql, opened when the first subscription starts and
 * kept open (reconnecting as needed) until close().
 *
 * Options: url; token (a function returning the current bearer token);
 * onState(state, detail) with state connecting | live | reconnecting |
 * failed | closed; onFatal({code, reason}) after a close that reconnecting
 * cannot fix (4403: a fresh token is needed).
 */
export class GraphQLWsClient {
  #url;
  #token;
  #onState;
  #onFatal;
  #ws = null;
  #acked = false;
  #ops = new Map();
  #nextId = 1;
  #attempt = 0;
  #retryTimer = null;
  #ackTimer = null;
  #idleTimer = null;
  #closed = false;
  #state = 'idle';

  /** Delay bounds of the reconnection backoff, in ms. */
  static MIN_DELAY_MS = 500;
  static MAX_DELAY_MS = 10_000;
  /** Without connection_ack within this, the socket is closed and retried. */
  static ACK_TIMEOUT_MS = 10_000;
  /**
   * A socket that hears nothing for this long is taken as dead (the server
   * pings every 15 s by default) and replaced.
   */
  static IDLE_TIMEOUT_MS = 45_000;

  constructor({ url, token, onState = () => {}, onFatal = () => {} }) {
    this.#url = url;
    this.#token = token;
    this.#onState = onState;
    this.#onFatal = onFatal;
    this.onlineListener = () => {
      if (this.#state === 'reconnecting') this.#reconnectNow();
    };
    window.addEventListener('online', this.onlineListener);
  }

  /** The connection's state: idle, connecting, live, reconnecting, failed or closed. */
  get state() {
    return this.#state;
  }

  /**
   * Starts an operation. payload() returns {query, variables} and is called
   * on every (re)subscribe. sink: {next(result), error(errors), complete()}.
   * Returns a function that stops the operation.
   */
  subscribe(payload, sink) {
    if (this.#closed) throw new Error('the GraphQL WebSocket client is closed');
    const id = String(this.#nextId++);
    const op = { id, payload, sink };
    this.#ops.set(id, op);
    if (this.#ws && this.#acked) this.#sendSubscribe(op);
    else if (!this.#ws && !this.#retryTimer && this.#state !== 'failed') this.#connect();
    return () => {
      if (!this.#ops.delete(id)) return;
      if (this.#ws && this.#acked) this.#send({ id, type: 'complete' });
    };
  }

  /** Closes the socket for good; operations end without a complete. */
  close() {
    this.#closed = true;
    window.removeEventListener('online', this.onlineListener);
    this.#ops.clear();
    this.#clearTimers();
    if (this.#ws) {
      const ws = this.#ws;
      this.#ws = null;
      ws.close(1000, 'normal closure');
    }
    this.#setState('closed');
  }

  #setState(state, detail = '') {
    this.#state = state;
    this.#onState(state, detail);
  }

  #connect() {
    this.#clearTimers();
    this.#acked = false;
    this.#setState(this.#attempt === 0 ? 'connecting' : 'reconnecting', this.#attempt === 0 ? '' : 'connecting');
    let ws;
    try {
      ws = new WebSocket(this.#url, PROTOCOL);
    } catch (err) {
      this.#scheduleReconnect(`cannot open a WebSocket: ${err.message}`);
      return;
    }
    this.#ws = ws;
    ws.addEventListener('open', () => {
      if (ws !== this.#ws) return;
      this.#send({ type: 'connection_init', payload: { Authorization: `Bearer ${this.#token()}` } });
      this.#ackTimer = setTimeout(() => this.#abandon(ws, 'no connection_ack from the server'), GraphQLWsClient.ACK_TIMEOUT_MS);
      this.#touch();
    });
    ws.addEventListener('message', (ev) => {
      if (ws !== this.#ws) return;
      this.#touch();
      this.#onMessage(ev.data);
    });
    ws.addEventListener('close', (ev) => {
      if (ws !== this.#ws) return;
      this.#ws = null;
      this.#acked = false;
      this.#clearTimers();
      if (this.#closed) return;
      const fatal = FATAL_CLOSE.get(ev.code);
      if (fatal) {
        this.#setState('failed', `${fatal} (close ${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`);
        this.#onFatal({ code: ev.code, reason: ev.reason || fatal });
        return;
      }
      this.#scheduleReconnect(`connection closed (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`);
    });
  }

  #onMessage(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      this.#abandon(this.#ws, 'the server sent a message that is not JSON');
      return;
    }
    switch (msg.type) {
      case 'connection_ack':
        clearTimeout(this.#ackTimer);
        this.#acked = true;
        this.#attempt = 0;
        this.#setState('live');
        for (const op of this.#ops.values()) this.#sendSubscribe(op);
        break;
      case 'ping':
        this.#send({ type: 'pong' });
        break;
      case 'pong':
        break;
      case 'next': {
        const op = this.#ops.get(msg.id);
        if (op) op.sink.next(msg.payload);
        break;
      }
      case 'error': {
        const op = this.#ops.get(msg.id);
        if (op) {
          this.#ops.delete(msg.id);
          op.sink.error(msg.payload);
        }
        break;
      }
      case 'complete': {
        const op = this.#ops.get(msg.id);
        if (op) {
          this.#ops.delete(msg.id);
          op.sink.complete?.();
        }
        break;
      }
      default:
        break;
    }
  }

  #sendSubscribe(op) {
    this.#send({ id: op.id, type: 'subscribe', payload: op.payload() });
  }

  #send(msg) {
    if (this.#ws && this.#ws.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(msg));
  }

  /** Restarts the idle watchdog: any message from the server is a sign of life. */
  #touch() {
    clearTimeout(this.#idleTimer);
    const ws = this.#ws;
    this.#idleTimer = setTimeout(() => this.#abandon(ws, 'no message from the server'), GraphQLWsClient.IDLE_TIMEOUT_MS);
  }

  /**
   * Gives up on a socket that is silent or misbehaving: closes it without
   * waiting for its close handshake (a dead peer never answers) and
   * reconnects.
   */
  #abandon(ws, why) {
    if (!ws || ws !== this.#ws) return;
    this.#ws = null;
    this.#acked = false;
    this.#clearTimers();
    ws.close(4000, why.slice(0, 100));
    if (!this.#closed) this.#scheduleReconnect(why);
  }

  #scheduleReconnect(why) {
    this.#attempt++;
    const base = Math.min(GraphQLWsClient.MAX_DELAY_MS, GraphQLWsClient.MIN_DELAY_MS * 2 ** (this.#attempt - 1));
    const delay = Math.round(base / 2 + Math.random() * (base / 2));
    this.#setState('reconnecting', `${why}; retrying in ${(delay / 1000).toFixed(1)} s`);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null;
      this.#connect();
    }, delay);
  }

  #reconnectNow() {
    if (!this.#retryTimer) return;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    this.#connect();
  }

  #clearTimers() {
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#ackTimer);
    clearTimeout(this.#idleTimer);
    this.#retryTimer = null;
  }
}
