// The shared half of bench/endless_sqs.js and bench/endless_mns.js: options, message numbering,
// counters, the added latency, /stats and SIGTERM. Node's standard library only.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');

const PAD = 'x'.repeat(180); // ~300 B JSON bodies, as bench/e2e_fake.py's body(i)

/** Parse `--latency-ms N`, `--max-messages N` (0: endless) and `--port N`. */
function parseOptions(argv) {
  const opts = { latencyMs: 0, maxMessages: 0, port: 0 };
  const names = { '--latency-ms': 'latencyMs', '--max-messages': 'maxMessages', '--port': 'port' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]];
    const value = Number(argv[i + 1]);
    if (key === undefined || !Number.isInteger(value) || value < 0) {
      process.stderr.write(`usage: node ${process.argv[1]} [--latency-ms N] [--max-messages N] [--port N]\n`);
      process.exit(2);
    }
    opts[key] = value;
  }
  return opts;
}

/** One event as bench/e2e_fake.py's body(i) makes it (a float like 0.01 * i prints as JS does). */
function body(i) {
  return `{"event_id":${i},"user_id":${i % 1000},"action":"purchase","amount":${i * 0.01},` +
    `"ts":"2026-11-22T10:00:00.000Z","payload":"${PAD}"}`;
}

function md5Hex(text) {
  return crypto.createHash('md5').update(text).digest('hex');
}

/**
 * Counters, message numbering and the endless queue's one rule: hand out fresh messages until
 * `maxMessages` (if set) have gone. Handles are `<run>.<seq>.<generation>`; a handle of
 * another run (e.g. the job's delete-permission probe) is invalid.
 */
class Endless {
  constructor(opts) {
    this.opts = opts;
    this.run = crypto.randomBytes(6).toString('hex');
    this.idPrefix = `${this.run.slice(0, 8)}-${this.run.slice(8, 12)}-4000-8000-`;
    this.next = 0;
    this.generation = 0;
    this.counts = { received: 0, deleted: 0, visibility_changes: 0, sent: 0, invalid_handles: 0 };
    this.calls = {};
    this.cpu0 = process.cpuUsage();
    this.startedAt = Date.now();
  }

  /** How many of `wanted` messages may go now (0 once `maxMessages` are out). */
  take(wanted) {
    const left = this.opts.maxMessages ? this.opts.maxMessages - this.next : wanted;
    const n = Math.max(0, Math.min(wanted, left));
    this.counts.received += n;
    return n;
  }

  /** The next message's sequence number, id and handle. */
  fresh() {
    const seq = this.next++;
    const id = this.idPrefix + seq.toString(16).padStart(12, '0');
    return { seq, id, handle: `${this.run}.${seq}.0` };
  }

  valid(handle) {
    const ok = typeof handle === 'string' && handle.startsWith(this.run + '.');
    if (!ok) this.counts.invalid_handles++;
    return ok;
  }

  /** A new handle for the same message (MNS replaces a handle when its visibility changes). */
  renew(handle) {
    const seq = handle.split('.')[1];
    return `${this.run}.${seq}.${++this.generation}`;
  }

  call(name) {
    this.calls[name] = (this.calls[name] || 0) + 1;
  }

  exhausted() {
    return this.opts.maxMessages > 0 && this.next >= this.opts.maxMessages;
  }

  stats() {
    const cpu = process.cpuUsage(this.cpu0);
    const cpuUs = cpu.user + cpu.system;
    const perMessage = this.counts.received ? cpuUs / this.counts.received : null;
    return {
      ...this.counts,
      calls: this.calls,
      cpu_seconds: cpuUs / 1e6,
      cpu_us_per_message: perMessage,
      wall_seconds: (Date.now() - this.startedAt) / 1000,
      latency_ms: this.opts.latencyMs,
    };
  }
}

/**
 * Serve `handle(req, body, reply)` on 127.0.0.1, each reply delayed by `--latency-ms`; print
 * the port as the first line; `GET /stats` answers the counters as JSON, SIGTERM prints them
 * and exits. `reply(status, headers, payload, extraDelayMs)`.
 */
function serve(state, handle) {
  const server = http.createServer({ noDelay: true, keepAliveTimeout: 0 }, (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/stats') {
        const payload = JSON.stringify(state.stats());
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) });
        res.end(payload);
        return;
      }
      const reply = (status, headers, payload, extraDelayMs = 0) => {
        const send = () => {
          res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(payload) });
          res.end(payload);
        };
        const delay = state.opts.latencyMs + extraDelayMs;
        if (delay > 0) setTimeout(send, delay);
        else send();
      };
      handle(req, Buffer.concat(chunks).toString('utf8'), reply);
    });
  });
  server.keepAliveTimeout = 0; // never close an idle keep-alive connection: the SDKs reuse theirs
  server.listen(state.opts.port, '127.0.0.1', () => {
    process.stdout.write(`${server.address().port}\n`);
    state.cpu0 = process.cpuUsage(); // the start-up is not the clients' doing
  });
  process.on('SIGTERM', () => {
    fs.writeSync(1, JSON.stringify(state.stats()) + '\n'); // synchronous: the process exits next
    process.exit(0);
  });
  return server;
}

module.exports = { Endless, body, md5Hex, parseOptions, serve };
