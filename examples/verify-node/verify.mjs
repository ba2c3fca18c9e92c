#!/usr/bin/env node
// verify.mjs: an offline verifier of Aether Audit NDJSON audit exports
// and signed checkpoints, in Node.js with nothing but its built-in modules.
// It does what `aether verify` does, with the same flags, output lines and
// exit codes (see README.md and docs/audit-chain.md):
//
//   node verify.mjs --export FILE [--checkpoint FILE.jws --keys JWKS-FILE-or-URL] [--previous-hash HEX]
//
// Exit 0: everything verifies; 1: a verification failure; 2: bad usage or
// unreadable input. One line per problem, "line N: sequence S: <problem>",
// then a summary.

import { createHash, createPublicKey, verify as verifySignature } from 'node:crypto';
import { open, readFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { createGunzip } from 'node:zlib';

const MAX_LINE_BYTES = 8 << 20; // as aether verify: an event is at most about 1 MiB
const MAX_DETAILS_BYTES = 16384; // domain.MaxDetailsBytes
const MAX_DETAILS_DEPTH = 16; // domain.MaxDetailsDepth
const MAX_PRINTED = 1000;
const CHECKPOINT_TYPE = 'aether-checkpoint+jws';
const ZERO_HASH = Buffer.alloc(32);

class UsageError extends Error {}

// ---------------------------------------------------------------------------
// JSON, keeping what JSON.parse loses. parseJSON returns a tree:
//   {t:'obj', entries:[[key, value], ...]}  (order and repeated keys kept)
//   {t:'arr', items:[...]}
//   {t:'str', v}     the decoded string, as Go's encoding/json decodes it
//   {t:'num', raw}   the number exactly as written
//   {t:'lit', raw}   true, false or null
// It throws on anything that is not one JSON value.

function parseJSON(text) {
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const hex4 = (at) => {
    const h = text.slice(at, at + 4);
    return /^[0-9a-fA-F]{4}$/.test(h) ? parseInt(h, 16) : -1;
  };
  const string = () => {
    i++; // the opening quote
    let out = '';
    let from = i;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(from, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('control character in string');
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += text.slice(from, i);
      const e = text[i + 1];
      const simple = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e in simple) {
        out += simple[e];
        i += 2;
      } else if (e === 'u') {
        let cp = hex4(i + 2);
        if (cp < 0) fail('bad \\u escape');
        i += 6;
        if (cp >= 0xd800 && cp < 0xe000) {
          // Go: a valid surrogate pair is one character; anything else U+FFFD.
          const lo = text[i] === '\\' && text[i + 1] === 'u' ? hex4(i + 2) : -1;
          if (cp < 0xdc00 && lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            i += 6;
          } else {
            cp = 0xfffd;
          }
        }
        out += String.fromCodePoint(cp);
      } else {
        fail('bad escape');
      }
      from = i;
    }
  };
  const number = () => {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 1024));
    if (!m) fail('bad number');
    i += m[0].length;
    return { t: 'num', raw: m[0] };
  };
  const value = () => {
    ws();
    const from = i;
    const v = bare();
    v.from = from; // the value's raw text is text.slice(v.from, v.to)
    v.to = i;
    return v;
  };
  const bare = () => {
    const c = text[i];
    if (c === '{') {
      i++;
      const entries = [];
      ws();
      if (text[i] === '}') {
        i++;
        return { t: 'obj', entries };
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const k = string();
        ws();
        if (text[i] !== ':') fail('expected :');
        i++;
        entries.push([k, value()]);
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return { t: 'obj', entries };
        } else fail('expected , or }');
      }
    }
    if (c === '[') {
      i++;
      const items = [];
      ws();
      if (text[i] === ']') {
        i++;
        return { t: 'arr', items };
      }
      for (;;) {
        items.push(value());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return { t: 'arr', items };
        } else fail('expected , or ]');
      }
    }
    if (c === '"') return { t: 'str', v: string() };
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    for (const lit of ['true', 'false', 'null']) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return { t: 'lit', raw: lit };
      }
    }
    fail('unexpected character');
  };
  const v = value();
  ws();
  if (i !== text.length) fail('text after the JSON value');
  return v;
}

// jsonString escapes s as Go's encoding/json does with HTML escaping off:
// \" \\ \b \f \n \r \t, other controls as \u00xx, U+2028/U+2029 as \u2028
// and \u2029, everything else (<, >, &, /, DEL, non-ASCII) as is.
function jsonString(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c < 0x20) {
      const short = { 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t' }[c];
      out += short ?? '\\u00' + c.toString(16).padStart(2, '0');
    } else if (c === 0x2028 || c === 0x2029) out += '\\u' + c.toString(16);
    else if (c >= 0xd800 && c < 0xe000) out += '\ufffd'; // a lone surrogate
    else out += ch;
  }
  return out + '"';
}

// compareUTF8 orders strings by their UTF-8 bytes (not UTF-16 code units:
// U+FF61 sorts before U+1F600 in UTF-8, after it in UTF-16).
const compareUTF8 = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

// canonical writes a details value as domain.CanonicalJSON does: keys
// sorted by UTF-8 bytes, the last of repeated keys kept, no white space,
// numbers as written.
function canonical(v, depth) {
  switch (v.t) {
    case 'obj': {
      if (depth >= MAX_DETAILS_DEPTH) throw new Error(`must not nest deeper than ${MAX_DETAILS_DEPTH} levels`);
      const last = new Map();
      for (const [k, val] of v.entries) last.set(k, val);
      const keys = [...last.keys()].sort(compareUTF8);
      return '{' + keys.map((k) => jsonString(k) + ':' + canonical(last.get(k), depth + 1)).join(',') + '}';
    }
    case 'arr':
      if (depth >= MAX_DETAILS_DEPTH) throw new Error(`must not nest deeper than ${MAX_DETAILS_DEPTH} levels`);
      return '[' + v.items.map((x) => canonical(x, depth + 1)).join(',') + ']';
    case 'str':
      return jsonString(v.v);
    default:
      return v.raw;
  }
}

function canonicalDetails(v, rawLength) {
  if (v.t === 'lit' && v.raw === 'null') return '{}'; // absent details
  if (rawLength > 4 * MAX_DETAILS_BYTES) throw new Error(`must be at most ${MAX_DETAILS_BYTES} bytes`);
  if (v.t !== 'obj') throw new Error('must be a JSON object');
  const out = canonical(v, 0);
  if (Buffer.byteLength(out, 'utf8') > MAX_DETAILS_BYTES) throw new Error(`must be at most ${MAX_DETAILS_BYTES} bytes`);
  return out;
}

// ---------------------------------------------------------------------------
// One export line: an event JSON object. readEvent returns the fields the
// canonical encoding covers, decoded as the Go verifier decodes them.

class FieldError extends Error {
  constructor(field, msg) {
    super(`${field}: ${msg}`);
  }
}

const objectEntries = (v) => {
  const m = new Map();
  for (const [k, val] of v.entries) m.set(k, val); // the last of repeated keys
  return m;
};

function str(v, field) {
  if (!v || v.t !== 'str') throw new FieldError(field, 'malformed JSON');
  return v.v;
}

// nested reads an object of string fields (absent ones ""), or null when
// nullable.
function nested(v, field, keys, nullable) {
  if (nullable && v.t === 'lit' && v.raw === 'null') return null;
  if (v.t !== 'obj') throw new FieldError(field, 'malformed JSON');
  const m = objectEntries(v);
  const out = {};
  for (const k of keys) out[k] = m.has(k) ? str(m.get(k), field) : '';
  return out;
}

// uuid reads a UUID in any form github.com/google/uuid parses and returns
// its canonical lower-case hyphenated form.
function uuid(s) {
  let h = s;
  if (h.length === 45 && h.slice(0, 9).toLowerCase() === 'urn:uuid:') h = h.slice(9);
  else if (h.length === 38 && h[0] === '{' && h[37] === '}') h = h.slice(1, 37);
  if (h.length === 36) {
    if (h[8] !== '-' || h[13] !== '-' || h[18] !== '-' || h[23] !== '-') throw new Error('invalid UUID format');
    h = h.replace(/-/g, '');
  } else if (h.length !== 32) throw new Error(`invalid UUID length: ${s.length}`);
  if (!/^[0-9a-fA-F]{32}$/.test(h)) throw new Error('invalid UUID format');
  h = h.toLowerCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// canonicalTime reads an RFC 3339 time and writes it in UTC with six
// fractional digits (truncated), as the canonical encoding does. Date has
// only milliseconds, so the fraction is carried aside.
function canonicalTime(s) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))$/.exec(s);
  if (!m) throw new Error(`cannot parse ${JSON.stringify(s)} as RFC 3339`);
  const [, y, mo, d, h, mi, se, frac = '', , sign, oh, om] = m;
  const days = new Date(Date.UTC(2000, Number(mo), 0)).getUTCDate(); // of that month in a leap year
  const leap = (Number(y) % 4 === 0 && Number(y) % 100 !== 0) || Number(y) % 400 === 0;
  if (Number(mo) < 1 || Number(mo) > 12 || Number(d) < 1 || Number(d) > (Number(mo) === 2 && !leap ? 28 : days) ||
      Number(h) > 23 || Number(mi) > 59 || Number(se) > 59 || (sign && (Number(oh) > 23 || Number(om) > 59))) {
    throw new Error(`${JSON.stringify(s)}: a field is out of range`);
  }
  const t = new Date(0);
  const offset = sign ? (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) : 0;
  t.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  t.setUTCHours(Number(h), Number(mi) - offset, Number(se), 0);
  const p = (n, w) => String(n).padStart(w, '0');
  return `${p(t.getUTCFullYear(), 4)}-${p(t.getUTCMonth() + 1, 2)}-${p(t.getUTCDate(), 2)}T` +
    `${p(t.getUTCHours(), 2)}:${p(t.getUTCMinutes(), 2)}:${p(t.getUTCSeconds(), 2)}.${frac.padEnd(6, '0').slice(0, 6)}Z`;
}

const REQUIRED = ['id', 'tenantId', 'projectId', 'sequence', 'action', 'occurredAt', 'recordedAt', 'subject',
  'resource', 'outcome', 'details', 'chainHash'];
const MAX_UINT64 = (1n << 64n) - 1n;

// readEvent parses one line and returns {sequence (BigInt), tenantId,
// projectId, claimed (hex), canonical (the canonical bytes as a string)}.
function readEvent(text) {
  let tree;
  try {
    tree = parseJSON(text);
  } catch (err) {
    throw new FieldError('event', err.message);
  }
  if (tree.t !== 'obj') throw new FieldError('event', 'not a JSON object');
  const f = objectEntries(tree);
  for (const k of REQUIRED) if (!f.has(k)) throw new FieldError(k, 'missing');
  const wrap = (field, fn) => {
    try {
      return fn();
    } catch (err) {
      throw err instanceof FieldError ? err : new FieldError(field, err.message);
    }
  };
  const seqText = str(f.get('sequence'), 'sequence');
  if (!/^[0-9]+$/.test(seqText) || BigInt(seqText) > MAX_UINT64) throw new FieldError('sequence', 'not a decimal number');
  const hashText = str(f.get('chainHash'), 'chainHash');
  if (!/^[0-9a-fA-F]{64}$/.test(hashText)) throw new FieldError('chainHash', 'must be 64 hex digits');
  let version = 1; // exports from before version 2 have no chainVersion
  if (f.has('chainVersion')) {
    const v = f.get('chainVersion');
    if (v.t !== 'num' || (v.raw !== '1' && v.raw !== '2')) {
      throw new FieldError('chainVersion', `unknown canonical encoding version ${v.raw ?? JSON.stringify(v.v)}`);
    }
    version = Number(v.raw);
  }
  const e = {
    action: str(f.get('action'), 'action'),
    correlation: wrap('correlation', () => (f.has('correlation')
      ? nested(f.get('correlation'), 'correlation', ['traceId', 'requestId', 'causationId'], true) : null)),
    details: wrap('details', () => {
      const d = f.get('details');
      return canonicalDetails(d, Buffer.byteLength(text.slice(d.from, d.to), 'utf8'));
    }),
    evidenceDigests: wrap('evidenceDigests', () => {
      const v = f.get('evidenceDigests');
      if (!v || (v.t === 'lit' && v.raw === 'null')) return [];
      if (v.t !== 'arr') throw new FieldError('evidenceDigests', 'malformed JSON');
      return v.items.map((d) => nested(d, 'evidenceDigests', ['algorithm', 'value', 'label'], false));
    }),
    governance: wrap('governance', () => (f.has('governance')
      ? nested(f.get('governance'), 'governance', ['reason', 'ticket', 'risk', 'confirmedBy'], true) : null)),
    id: wrap('id', () => uuid(str(f.get('id'), 'id'))),
    occurredAt: wrap('occurredAt', () => canonicalTime(str(f.get('occurredAt'), 'occurredAt'))),
    outcome: str(f.get('outcome'), 'outcome'),
    projectId: str(f.get('projectId'), 'projectId'),
    recordedAt: wrap('recordedAt', () => canonicalTime(str(f.get('recordedAt'), 'recordedAt'))),
    recordedBy: wrap('recordedBy', () => (f.has('recordedBy')
      ? nested(f.get('recordedBy'), 'recordedBy', ['issuer', 'subject', 'tokenId', 'clientId'], true) : null)),
    resource: wrap('resource', () => nested(f.get('resource'), 'resource', ['type', 'id'], false)),
    sequence: BigInt(seqText),
    subject: wrap('subject', () => nested(f.get('subject'), 'subject', ['type', 'id', 'displayName'], false)),
    tenantId: str(f.get('tenantId'), 'tenantId'),
  };
  return {
    sequence: e.sequence, tenantId: e.tenantId, projectId: e.projectId,
    claimed: hashText.toLowerCase(), canonical: canonicalEvent(e, version),
  };
}

// canonicalEvent is AuditEvent.CanonicalBytes of domain/chain.go: the keys
// in this order, nested keys in their fixed order, "v" the version; version
// 2 adds recordedBy after recordedAt.
function canonicalEvent(e, version) {
  const S = jsonString;
  const obj = (o, keys) => (o === null ? 'null' : '{' + keys.map((k) => S(k) + ':' + S(o[k])).join(',') + '}');
  let out = '{"action":' + S(e.action) +
    ',"correlation":' + obj(e.correlation, ['traceId', 'requestId', 'causationId']) +
    ',"details":' + e.details +
    ',"evidenceDigests":[' + e.evidenceDigests.map((d) => obj(d, ['algorithm', 'value', 'label'])).join(',') + ']' +
    ',"governance":' + obj(e.governance, ['reason', 'ticket', 'risk', 'confirmedBy']) +
    ',"id":' + S(e.id) + ',"occurredAt":' + S(e.occurredAt) + ',"outcome":' + S(e.outcome) +
    ',"projectId":' + S(e.projectId) + ',"recordedAt":' + S(e.recordedAt);
  if (version >= 2) {
    const rb = e.recordedBy ?? { issuer: '', subject: '', tokenId: '', clientId: '' };
    out += ',"recordedBy":' + obj(rb, ['issuer', 'subject', 'tokenId', 'clientId']);
  }
  out += ',"resource":' + obj(e.resource, ['type', 'id']) + ',"sequence":' + S(e.sequence.toString()) +
    ',"subject":' + obj(e.subject, ['type', 'id', 'displayName']);
  if (e.tenantId !== '') out += ',"tenantId":' + S(e.tenantId);
  return out + ',"v":' + (version >= 2 ? 2 : 1) + '}';
}

// chainHash = SHA-256(previous chain hash, 32 raw bytes || canonical bytes).
const chainHash = (prev, canonicalText) =>
  createHash('sha256').update(prev).update(Buffer.from(canonicalText, 'utf8')).digest();

// ---------------------------------------------------------------------------
// Checkpoint: a compact JWS (EdDSA, Ed25519) checked against a JWKS.

async function loadKeys(src) {
  let text;
  try {
    if (/^https?:\/\//.test(src)) {
      const resp = await fetch(src, { signal: AbortSignal.timeout(15000), headers: { accept: 'application/json' } });
      if (resp.status !== 200) throw new Error(`GET ${src}: ${resp.status} ${resp.statusText}`);
      text = await resp.text();
    } else {
      text = await readFile(src, 'utf8');
    }
  } catch (err) {
    throw new UsageError(`keys: ${err.message}`);
  }
  let set;
  try {
    set = JSON.parse(text);
  } catch {
    set = null;
  }
  if (!set || !Array.isArray(set.keys)) throw new UsageError(`keys: ${src} is not a JSON Web Key Set ({"keys":[...]})`);
  const keys = new Map();
  for (const k of set.keys) {
    if (!k || k.kty !== 'OKP' || k.crv !== 'Ed25519' || typeof k.x !== 'string' || !k.kid) continue;
    try {
      const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x }, format: 'jwk' });
      keys.set(k.kid, [...(keys.get(k.kid) ?? []), key]);
    } catch {
      // not a usable key
    }
  }
  return keys;
}

const b64url = (s) => {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error('bad base64url');
  return Buffer.from(s, 'base64url');
};

// verifyCheckpoint returns the checkpoint's payload, or throws an Error
// saying why it does not verify.
function verifyCheckpoint(jws, keys) {
  const parts = jws.trim().split('.');
  let header;
  try {
    if (parts.length !== 3) throw new Error('not three parts');
    header = JSON.parse(b64url(parts[0]).toString('utf8'));
    if (header.alg !== 'EdDSA') throw new Error(`alg ${header.alg} is not EdDSA`);
    b64url(parts[1]);
    if (b64url(parts[2]).length === 0) throw new Error('no signature');
  } catch (err) {
    throw new Error(`not a compact JWS signed with EdDSA: ${err.message}`);
  }
  if (header.typ !== undefined && header.typ !== CHECKPOINT_TYPE) throw new Error(`JWS type ${header.typ} is not ${CHECKPOINT_TYPE}`);
  if (!header.kid) throw new Error('the JWS header has no kid');
  const candidates = keys.get(header.kid) ?? [];
  if (candidates.length === 0) throw new Error(`unknown key id ${JSON.stringify(header.kid)}: not in the key set`);
  const signed = Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii');
  const sig = b64url(parts[2]);
  if (!candidates.some((k) => verifySignature(null, signed, k, sig))) {
    throw new Error(`the signature does not verify with key ${header.kid}`);
  }
  let p;
  try {
    p = JSON.parse(b64url(parts[1]).toString('utf8'));
  } catch (err) {
    throw new Error(`payload is not JSON: ${err.message}`);
  }
  if (p.v !== 1) throw new Error(`payload version ${p.v} is not 1`);
  const dec = (name) => {
    if (typeof p[name] !== 'string' || !/^[0-9]+$/.test(p[name]) || BigInt(p[name]) > MAX_UINT64) {
      throw new Error(`payload ${name} ${JSON.stringify(p[name])} is not a decimal number`);
    }
    return BigInt(p[name]);
  };
  const hash = (name) => {
    if (typeof p[name] !== 'string' || !/^[0-9a-fA-F]{64}$/.test(p[name])) {
      throw new Error(`payload ${name}: ${JSON.stringify(p[name])} is not 64 hex digits`);
    }
    return p[name].toLowerCase();
  };
  return {
    kid: header.kid, tenantId: p.tenantId ?? '', projectId: p.projectId ?? '', issuedAt: p.issuedAt ?? '',
    sequence: dec('sequence'), purgedThroughSequence: dec('purgedThroughSequence'),
    chainHash: hash('chainHash'), anchorHash: hash('anchorHash'),
  };
}

// ---------------------------------------------------------------------------
// Reading the export: plain or gzip (told by the first two bytes), split
// into lines of raw bytes.

async function* exportLines(path) {
  let head;
  try {
    const fh = await open(path, 'r');
    try {
      head = Buffer.alloc(10);
      const { bytesRead } = await fh.read(head, 0, 10, 0);
      head = head.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw new UsageError(`export: ${err.message}`);
  }
  const gz = head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
  if (gz && (head.length < 10 || head[2] !== 8 || (head[3] & 0xe0) !== 0)) {
    throw new UsageError('export: gzip: invalid header');
  }
  let stream = createReadStream(path);
  if (gz) stream = stream.pipe(createGunzip());
  yield { gz };
  let carry = Buffer.alloc(0);
  let skipping = false;
  try {
    for await (const chunk of stream) {
      let buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
      let at;
      while ((at = buf.indexOf(0x0a)) >= 0) {
        if (skipping) skipping = false;
        else yield { raw: buf.subarray(0, at), terminated: true };
        buf = buf.subarray(at + 1);
      }
      if (buf.length > MAX_LINE_BYTES && !skipping) {
        yield { tooLong: true };
        skipping = true;
      }
      carry = skipping ? Buffer.alloc(0) : Buffer.from(buf);
    }
  } catch (err) {
    if (!gz) throw new UsageError(`export: ${err.message}`);
    yield { gzipError: err };
    return;
  }
  if (carry.length > 0) yield { raw: carry, terminated: false };
}

// ---------------------------------------------------------------------------
// The chain: the same rules as aether verify (package verify, chain.go).

async function main(argv) {
  const opts = {};
  const flags = { '--export': 'export', '--checkpoint': 'checkpoint', '--keys': 'keys', '--previous-hash': 'previousHash' };
  for (let i = 0; i < argv.length; i++) {
    let [flag, val] = argv[i].includes('=') ? [argv[i].slice(0, argv[i].indexOf('=')), argv[i].slice(argv[i].indexOf('=') + 1)] : [argv[i], undefined];
    if (flag === '--help' || flag === '-h') {
      process.stdout.write('usage: node verify.mjs --export FILE [--checkpoint FILE.jws --keys JWKS-FILE-or-URL] [--previous-hash HEX]\n');
      return 0;
    }
    if (!(flag in flags)) throw new UsageError(`unknown flag or argument ${argv[i]}`);
    if (val === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`${flag} needs a value`);
      val = argv[++i];
    }
    opts[flags[flag]] = val;
  }
  if (!opts.export) throw new UsageError('--export is required');
  if (!opts.checkpoint !== !opts.keys) throw new UsageError('--checkpoint and --keys go together');
  let previous = null;
  if (opts.previousHash !== undefined) {
    if (!/^[0-9a-fA-F]{64}$/.test(opts.previousHash)) throw new UsageError(`--previous-hash: ${JSON.stringify(opts.previousHash)} is not 64 hex digits`);
    previous = Buffer.from(opts.previousHash, 'hex');
  }

  const out = [];
  let problems = 0;
  const problem = (msg) => {
    problems++;
    if (problems <= MAX_PRINTED) out.push(msg);
    else if (problems === MAX_PRINTED + 1) out.push('(more problems are counted, not printed)');
  };
  const lineProblem = (n, seq, msg) => problem(`line ${n}: sequence ${seq}: ${msg}`);

  let cp = null;
  let cpError = null;
  if (opts.checkpoint) {
    let jws;
    try {
      jws = await readFile(opts.checkpoint, 'utf8');
    } catch (err) {
      throw new UsageError(`checkpoint: ${err.message}`);
    }
    const keys = await loadKeys(opts.keys);
    try {
      cp = verifyCheckpoint(jws, keys);
    } catch (err) {
      cpError = err;
    }
  }

  const startHash = (first) => {
    if (previous) return [previous, '--previous-hash'];
    if (first === 1n) return [ZERO_HASH, '32 zero bytes: the file starts at sequence 1'];
    if (first === 0n) throw new UsageError('the first line has sequence 0; sequences start at 1');
    if (cp && first === cp.purgedThroughSequence + 1n) {
      return [Buffer.from(cp.anchorHash, 'hex'),
        `the checkpoint's anchorHash: the file starts after its purgedThroughSequence ${cp.purgedThroughSequence}`];
    }
    throw new UsageError(`the file starts at sequence ${first}, so its chain starts from the chain hash of sequence ${first - 1n}: pass it with --previous-hash`);
  };

  const c = {
    lines: 0, events: 0, verified: 0, started: false, firstSeq: 0n, tenant: '', project: '',
    prevSeq: 0n, prev: ZERO_HASH, prevKnown: false, lastSeq: 0n, lastHash: '', startHex: '', startWhy: '',
  };
  const expected = () => (c.started ? String(c.prevSeq + 1n) : '?');
  const unreadable = (n, why) => {
    lineProblem(n, expected(), why);
    if (c.started) {
      c.prevSeq++;
      c.prevKnown = false;
    }
  };

  let gz = false;
  let n = 0;
  for await (const item of exportLines(opts.export)) {
    if (item.gz !== undefined) {
      gz = item.gz;
      continue;
    }
    n++;
    c.lines = n;
    if (item.gzipError) {
      lineProblem(n, expected(), `the gzip stream is damaged or cut short here: ${item.gzipError.message}`);
      break;
    }
    if (item.tooLong) {
      unreadable(n, `line longer than ${MAX_LINE_BYTES} bytes`);
      continue;
    }
    if (item.raw.length === 0) {
      unreadable(n, 'empty line');
      continue;
    }
    let ev;
    try {
      ev = readEvent(item.raw.toString('utf8'));
    } catch (err) {
      const why = `not an event: ${err.message}`;
      unreadable(n, item.terminated ? why : `cut short (no newline at the end of the file): ${why}`);
      continue;
    }
    const seq = String(ev.sequence);
    if (!item.terminated) lineProblem(n, seq, 'cut short: no newline at the end of the file');
    c.events++;
    c.lastSeq = ev.sequence;
    c.lastHash = ev.claimed;
    if (!c.started) {
      const [start, why] = startHash(ev.sequence);
      Object.assign(c, {
        started: true, firstSeq: ev.sequence, tenant: ev.tenantId, project: ev.projectId,
        prevSeq: ev.sequence - 1n, prev: start, prevKnown: true, startHex: start.toString('hex'), startWhy: why,
      });
    }
    if (ev.tenantId !== c.tenant || ev.projectId !== c.project) {
      lineProblem(n, seq, `tenant/project is ${JSON.stringify(ev.tenantId)}/${JSON.stringify(ev.projectId)}, not ` +
        `${JSON.stringify(c.tenant)}/${JSON.stringify(c.project)} as on the first line`);
    }
    const want = c.prevSeq + 1n;
    if (ev.sequence === want) {
      if (c.prevKnown) {
        const got = chainHash(c.prev, ev.canonical).toString('hex');
        if (got === ev.claimed) c.verified++;
        else lineProblem(n, seq, `chain hash mismatch: the event and the previous chain hash give ${got}, the line says ${ev.claimed}`);
      }
    } else if (ev.sequence > want) {
      lineProblem(n, seq, `sequence gap: expected ${want}, found ${ev.sequence} (${ev.sequence - want} missing)`);
    } else {
      lineProblem(n, seq, `out of order: sequence ${ev.sequence} after ${c.prevSeq} (expected ${want})`);
      continue; // the chain stays where it was
    }
    c.prevSeq = ev.sequence;
    c.prev = Buffer.from(ev.claimed, 'hex');
    c.prevKnown = true;
  }
  if (c.events === 0) problem('export: no events');

  let cpStatus = 'not checked (no --checkpoint)';
  if (opts.checkpoint) {
    if (cpError) {
      problem(`checkpoint: ${cpError.message}`);
      cpStatus = `FAILED: ${cpError.message}`;
    } else {
      const before = problems;
      if (c.events > 0) {
        if (cp.tenantId !== c.tenant || cp.projectId !== c.project) {
          problem(`checkpoint: for tenant/project ${JSON.stringify(cp.tenantId)}/${JSON.stringify(cp.projectId)}, ` +
            `the file is ${JSON.stringify(c.tenant)}/${JSON.stringify(c.project)}`);
        }
        if (cp.sequence !== c.lastSeq) {
          problem(`checkpoint: covers sequence ${cp.sequence}, the file ends at sequence ${c.lastSeq} (line ${c.lines})`);
        } else if (cp.chainHash !== c.lastHash) {
          problem(`checkpoint: chain hash ${cp.chainHash} at sequence ${cp.sequence}, the file's last line says ${c.lastHash}`);
        }
      }
      cpStatus = problems > before || c.events === 0
        ? `FAILED: signature valid (key ${cp.kid}), but the checkpoint does not match the file`
        : `verified: key ${cp.kid}, sequence ${cp.sequence}, chain hash ${cp.chainHash}, issued ${cp.issuedAt}`;
    }
  }

  let summary = `export: ${c.lines} lines (${gz ? 'gzip' : 'plain'}), ${c.events} events`;
  if (c.events > 0) summary += `, sequences ${c.firstSeq} to ${c.lastSeq}, ${c.verified} chain hashes recomputed and matched`;
  out.push(summary);
  if (c.started) {
    out.push(`start hash: ${c.startHex} (${c.startWhy})`);
    out.push(`last chain hash: ${c.lastHash} (sequence ${c.lastSeq})`);
  }
  out.push(`checkpoint: ${cpStatus}`);
  out.push(problems === 0 ? 'result: OK, the export verifies' : `result: FAILED, ${problems} problems`);
  process.stdout.write(out.join('\n') + '\n');
  return problems === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`verify.mjs: ${err.message}\n`);
    process.exitCode = 2; // bad usage, unreadable input (or a bug: no verdict either way)
  },
);
