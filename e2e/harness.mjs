// Test harness of the end-to-end tests: runs `aether serve` (the binary in
// AETHER_BIN, built by `make e2e`) on a free port with a fresh data dir,
// mints tokens with `aether token`, records events over HTTP, and collects
// what graphql-ws subscriptions deliver. It builds nothing itself.

import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** How long the server may take to answer GET /readyz with 200. */
export const READY_DEADLINE_MS = 90_000;
/** How long the server may take to exit after SIGTERM. */
export const EXIT_DEADLINE_MS = 30_000;
/** Default deadline of a condition awaited in a test. */
export const WAIT_MS = 15_000;

/** The aether binary under test, from AETHER_BIN (absolute or relative to the cwd). */
export function aetherBin() {
  const bin = process.env.AETHER_BIN;
  if (!bin) {
    throw new Error('AETHER_BIN is not set: run the tests with `make e2e`, which builds bin/aether and passes its path');
  }
  const abs = path.resolve(bin);
  fs.accessSync(abs, fs.constants.X_OK);
  return abs;
}

/** A TCP port free on 127.0.0.1 when this returns (the CLI cannot listen on port 0). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * The environment of every aether process: the caller's, minus AETHER_*
 * settings (a stray AETHER_JWKS_URL or AETHER_ADDR would change what is
 * tested), plus DATABASE_URL only when the caller set it (otherwise the
 * binary runs its embedded PostgreSQL under the data dir), and AETHER_DEV.
 */
function aetherEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('AETHER_') && k !== 'DATABASE_URL') env[k] = v;
  }
  if (process.env.DATABASE_URL) env.DATABASE_URL = process.env.DATABASE_URL;
  // Development mode: serve accepts the tokens `aether token` mints.
  env.AETHER_DEV = 'true';
  return { ...env, ...extra };
}

/** Keeps the last lines a child process wrote, for failure messages. */
class LogTail {
  constructor(max = 200) {
    this.max = max;
    this.lines = [];
    this.partial = '';
  }

  push(chunk) {
    const text = this.partial + chunk;
    const parts = text.split('\n');
    this.partial = parts.pop();
    for (const line of parts) {
      this.lines.push(line);
      if (process.env.AETHER_E2E_LOG) process.stderr.write(`[aether] ${line}\n`);
    }
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
  }

  toString() {
    return [...this.lines, this.partial].filter(Boolean).join('\n');
  }
}

/**
 * A running `aether serve`. Use AetherServer.start(); stop() sends SIGTERM,
 * requires exit code 0 and removes the data dir.
 */
export class AetherServer {
  constructor({ bin, dataDir, port, child, log, env = {} }) {
    this.bin = bin;
    /** Extra environment of the process (see start), kept for restart(). */
    this.env = env;
    this.dataDir = dataDir;
    this.port = port;
    this.child = child;
    this.log = log;
    this.httpURL = `http://127.0.0.1:${port}`;
    this.graphqlURL = `${this.httpURL}/graphql`;
    this.wsURL = `ws://127.0.0.1:${port}/graphql`;
    /** Resolves with {code, signal} when the process exits. */
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        resolve({ code: child.exitCode, signal: child.signalCode });
      } else {
        child.once('exit', (code, signal) => resolve({ code, signal }));
      }
    });
  }

  /**
   * Starts the server in a fresh data dir and waits until it is ready.
   * options.env adds AETHER_* settings (e.g. AETHER_WEBHOOK_ALLOW_HTTP).
   */
  static async start(options = {}) {
    const bin = aetherBin();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-e2e-'));
    // When run as root the embedded PostgreSQL runs as the unprivileged
    // postgres user, which must be able to reach <dataDir>/postgres.
    fs.chmodSync(dataDir, 0o755);
    try {
      // The port is free when chosen but another process could take it
      // before the server binds it: try a few times.
      for (let attempt = 1; ; attempt++) {
        const port = await freePort();
        const server = AetherServer.#spawn(bin, dataDir, port, options.env);
        try {
          await server.#waitReady();
          return server;
        } catch (err) {
          await server.#kill();
          if (attempt < 3 && /address already in use/i.test(server.log.toString())) continue;
          throw err;
        }
      }
    } catch (err) {
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw err;
    }
  }

  static #spawn(bin, dataDir, port, extraEnv = {}) {
    const child = spawn(bin, ['serve'], {
      env: aetherEnv({ ...extraEnv, AETHER_ADDR: `127.0.0.1:${port}`, AETHER_DATA_DIR: dataDir }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const log = new LogTail();
    child.stdout.setEncoding('utf8').on('data', (d) => log.push(d));
    child.stderr.setEncoding('utf8').on('data', (d) => log.push(d));
    child.on('error', (err) => log.push(`spawn error: ${err.message}\n`));
    return new AetherServer({ bin, dataDir, port, child, log, env: extraEnv });
  }

  /** Polls GET /readyz until it answers 200, the process exits, or the deadline passes. */
  async #waitReady() {
    const deadline = Date.now() + READY_DEADLINE_MS;
    let exited = null;
    this.exited.then((e) => (exited = e));
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      if (exited) {
        throw new Error(`aether serve exited before it was ready (code ${exited.code}, signal ${exited.signal}); its log:\n${this.log}`);
      }
      try {
        const res = await fetch(`${this.httpURL}/readyz`, { signal: AbortSignal.timeout(5_000) });
        last = `HTTP ${res.status}: ${(await res.text()).trim()}`;
        if (res.status === 200) return;
      } catch (err) {
        last = err.cause?.code ?? err.message;
      }
      // Poll interval, bounded by the deadline; also wakes when the process exits.
      await settleWithin(this.exited, Math.min(200, Math.max(0, deadline - Date.now())));
    }
    throw new Error(`GET /readyz did not answer 200 within ${READY_DEADLINE_MS} ms (last: ${last}); server log:\n${this.log}`);
  }

  /** Mints a token with `aether token` against this server's data dir. */
  async token({ tenant, projects, permissions = 'audit:read,audit:write', ttl } = {}) {
    const args = ['token', '--data-dir', this.dataDir, '--tenant', tenant, '--permissions', permissions];
    for (const p of projects) args.push('--project', p);
    if (ttl) args.push('--ttl', ttl);
    const { stdout } = await execFileP(this.bin, args, { env: aetherEnv({}), timeout: 30_000 });
    const tok = stdout.trim();
    if (tok.split('.').length !== 3) throw new Error(`aether token printed no JWT: ${JSON.stringify(stdout)}`);
    return tok;
  }

  /** POSTs a GraphQL operation to /graphql and returns the parsed response (any status). */
  async graphql(token, query, variables) {
    const res = await fetch(this.graphqlURL, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const text = await res.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`POST /graphql: HTTP ${res.status}, not JSON: ${text}`);
    }
    return { status: res.status, body };
  }

  /** Records events with the recordAuditEvents mutation; returns [{id, sequence, action}]. */
  async record(token, events) {
    const { status, body } = await this.graphql(
      token,
      `mutation Record($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { id sequence action } } }`,
      { in: { events } },
    );
    if (status !== 200 || body.errors || !body.data?.recordAuditEvents) {
      throw new Error(`recordAuditEvents failed: HTTP ${status}: ${JSON.stringify(body)}`);
    }
    return body.data.recordAuditEvents.events;
  }

  /**
   * The psql arguments that reach this server's database as its owner:
   * DATABASE_URL when set, else the embedded cluster's socket as its
   * superuser (see internal/pgcluster: <dataDir>/postgres, or the folder
   * named in its cluster-location file; the socket in its run folder, or
   * in a folder of the temp dir when that path is too long).
   */
  #psqlTarget() {
    if (process.env.DATABASE_URL) return [process.env.DATABASE_URL];
    const base = path.join(this.dataDir, 'postgres');
    let home = base;
    try {
      home = fs.readFileSync(path.join(base, 'cluster-location'), 'utf8').trim() || base;
    } catch {
      // The cluster lives in the data dir itself.
    }
    const hashed = `aether-pg-${createHash('sha256').update(home).digest('hex').slice(0, 16)}`;
    const candidates = [path.join(home, 'run'), path.join(os.tmpdir(), hashed), path.join('/tmp', hashed)];
    const socketDir = candidates.find((d) => fs.existsSync(path.join(d, '.s.PGSQL.5432')));
    if (!socketDir) throw new Error(`no socket of the embedded PostgreSQL in ${candidates.join(', ')}`);
    return ['-h', socketDir, '-U', 'postgres', '-d', 'aether'];
  }

  /**
   * Rewrites a stored audit event behind the append-only trigger's back, as
   * an attacker with the database owner's access would (psql, in one
   * transaction): its outcome becomes FAILURE, so its content no longer
   * matches its chain hash.
   */
  async tamperEvent(tenant, project, sequence) {
    const quote = (v) => `'${String(v).replaceAll("'", "''")}'`;
    const sql = `BEGIN;
ALTER TABLE audit_events DISABLE TRIGGER USER;
UPDATE audit_events SET outcome = 'FAILURE' WHERE tenant_id = ${quote(tenant)} AND project_id = ${quote(project)} AND sequence = ${Number(sequence)};
ALTER TABLE audit_events ENABLE TRIGGER USER;
COMMIT;`;
    const { stdout } = await execFileP('psql', [...this.#psqlTarget(), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-c', sql], { timeout: 30_000 });
    return stdout;
  }

  /** SIGTERM, then requires a clean exit (code 0) within EXIT_DEADLINE_MS; removes the data dir. */
  async stop() {
    try {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
      const result = await settleWithin(this.exited, EXIT_DEADLINE_MS);
      if (result === null) {
        await this.#kill();
        throw new Error(`aether serve did not exit within ${EXIT_DEADLINE_MS} ms of SIGTERM; its log:\n${this.log}`);
      }
      if (result.code !== 0) {
        throw new Error(`aether serve exited with code ${result.code} (signal ${result.signal}) after SIGTERM; its log:\n${this.log}`);
      }
    } finally {
      fs.rmSync(this.dataDir, { recursive: true, force: true });
    }
  }

  /**
   * Stops the server with SIGTERM (requiring exit code 0) and starts it
   * again on the same port, data dir and database, as a redeploy would;
   * resolves when it is ready again. Clients see their connections drop.
   */
  async restart() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const result = await settleWithin(this.exited, EXIT_DEADLINE_MS);
    if (result === null) {
      await this.#kill();
      throw new Error(`aether serve did not exit within ${EXIT_DEADLINE_MS} ms of SIGTERM; its log:\n${this.log}`);
    }
    if (result.code !== 0) {
      throw new Error(`aether serve exited with code ${result.code} (signal ${result.signal}) after SIGTERM; its log:\n${this.log}`);
    }
    const next = AetherServer.#spawn(this.bin, this.dataDir, this.port, this.env);
    this.child = next.child;
    this.log = next.log;
    this.exited = next.exited;
    await this.#waitReady();
  }

  /** Last resort: SIGTERM (so the embedded PostgreSQL is stopped), then SIGKILL. */
  async #kill() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const done = await settleWithin(this.exited, EXIT_DEADLINE_MS);
    if (done === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

/**
 * Resolves with promise's value, or with null when ms milliseconds pass
 * first; the timer is cleared either way, so it never keeps the process
 * alive.
 */
export async function settleWithin(promise, ms) {
  let timer;
  try {
    return await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms, null)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Collects what a graphql-ws sink receives, and lets a test await a
 * condition over it with a deadline (checked on every delivery, no sleeps).
 */
export class SinkRecorder {
  constructor(name) {
    this.name = name;
    /** Every next() payload, in order. */
    this.payloads = [];
    /** The error() argument, if any. */
    this.error = undefined;
    this.completed = false;
    this.waiters = new Set();
  }

  /** The sink to pass to client.subscribe. */
  get sink() {
    return {
      next: (value) => this.#notify(() => this.payloads.push(value)),
      error: (err) => this.#notify(() => (this.error = err)),
      complete: () => this.#notify(() => (this.completed = true)),
    };
  }

  /** True once error() or complete() was called. */
  get ended() {
    return this.completed || this.error !== undefined;
  }

  /** The auditEventRecorded sequences delivered so far. */
  get sequences() {
    return this.payloads.map((p) => p?.data?.auditEventRecorded?.sequence);
  }

  #notify(change) {
    change();
    for (const w of this.waiters) w();
  }

  /**
   * Resolves when predicate(this) holds; rejects when the deadline passes
   * first, describing what was received.
   */
  until(predicate, what, timeoutMs = WAIT_MS) {
    return new Promise((resolve, reject) => {
      const check = () => {
        let ok;
        try {
          ok = predicate(this);
        } catch (err) {
          finish();
          reject(err);
          return;
        }
        if (ok) {
          finish();
          resolve(this);
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`${this.name}: timed out after ${timeoutMs} ms waiting for ${what}; received ${this.describe()}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  describe() {
    return JSON.stringify({
      next: this.payloads,
      error: describeError(this.error),
      completed: this.completed,
    });
  }
}

/** A JSON-friendly view of what graphql-ws passes to sink.error / on.closed. */
export function describeError(err) {
  if (err === undefined) return undefined;
  if (Array.isArray(err)) return err;
  if (err && typeof err === 'object' && 'code' in err && 'reason' in err) {
    return { closeEvent: true, code: err.code, reason: err.reason };
  }
  if (err instanceof Error) return { message: err.message };
  return err;
}

/** A deferred value: the first settle() wins. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** Awaits promise, rejecting with message when timeoutMs passes first. */
export async function withDeadline(promise, message, timeoutMs = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms: ${message}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The audit subscription the tests drive, with a resume point. */
export const AUDIT_SUBSCRIPTION = `subscription($p: ID!, $after: Uint64) {
  auditEventRecorded(projectId: $p, afterSequence: $after) { sequence action }
}`;

/** Decimal strings "from".."to", as the Uint64 scalar serialises them. */
export function seqs(from, to) {
  return Array.from({ length: to - from + 1 }, (_, i) => String(from + i));
}

let eventCounter = 0;

/**
 * n valid RecordAuditEventInput values for project, each naming a device of
 * its own and carrying its number in details.
 */
export function eventInputs(project, n, action = 'device.firmware.updated') {
  return Array.from({ length: n }, () => {
    eventCounter++;
    return {
      projectId: project,
      action,
      occurredAt: new Date().toISOString(),
      subject: { type: 'SERVICE', id: 'svc-e2e', displayName: 'E2E updater' },
      resource: { type: 'device', id: `dev-${eventCounter}` },
      outcome: 'SUCCESS',
      details: { n: eventCounter },
    };
  });
}
