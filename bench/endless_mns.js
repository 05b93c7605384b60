// An endless MNS endpoint for bench/intake.py: the XML REST protocol aliyun-mns-sdk 1.3.0 speaks
// (the formats of tests/emulators/mns.py), every BatchReceiveMessage answered with fresh
// messages, every delete and visibility change accepted.
//
//   node bench/endless_mns.js [--latency-ms N] [--max-messages N] [--port N]
//
// Prints the port first. GET /stats (or SIGTERM) reports the counts and this process's CPU per
// message received. The `MNS id:signature` Authorization header must be there; it is not verified.
'use strict';

const { Endless, body, md5Hex, parseOptions, serve } = require('./endless_server.js');

const state = new Endless(parseOptions(process.argv.slice(2)));
const NS = 'http://mns.aliyuncs.com/doc/v1/';
const VISIBILITY_S = 60;
const MAX_WAIT_S = 30;
const HANDLE = /<ReceiptHandle>([^<]*)<\/ReceiptHandle>/g;

function doc(root, inner) {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root} xmlns="${NS}">${inner}</${root}>`;
}

function headers(payload) {
  const h = { 'x-mns-request-id': state.run.toUpperCase(), 'x-mns-version': '2015-06-06' };
  return payload ? { ...h, 'Content-Type': 'text/xml;charset=utf-8' } : h;
}

function ok(reply, status, payload, extraDelayMs = 0) {
  reply(status, headers(payload), payload, extraDelayMs);
}

function error(reply, status, code, message, host, extraDelayMs = 0) {
  const inner = `<Code>${code}</Code><Message>${message}</Message>` +
    `<RequestId>${state.run.toUpperCase()}</RequestId><HostId>http://${host}</HostId>`;
  ok(reply, status, doc('Error', inner), extraDelayMs);
}

function query(url) {
  const out = {};
  const raw = url.split('?')[1] || '';
  for (const part of raw.split('&')) {
    if (!part) continue;
    const [k, v = ''] = part.split('=');
    out[k.toLowerCase()] = decodeURIComponent(v); // by hand: '+' in a handle is not a space
  }
  return out;
}

function receive(q, reply, host) {
  const n = state.take(Math.min(16, Math.max(1, Number(q.numofmessages) || 1)));
  if (n === 0) {
    const waitS = q.waitseconds === undefined ? 0 : Math.min(MAX_WAIT_S, Number(q.waitseconds));
    error(reply, 404, 'MessageNotExist', 'Message not exist.', host, waitS * 1000);
    return;
  }
  const now = Date.now();
  const tail = `<EnqueueTime>${now}</EnqueueTime><FirstDequeueTime>${now}</FirstDequeueTime>` +
    `<DequeueCount>1</DequeueCount><Priority>8</Priority>`;
  const visible = `<NextVisibleTime>${now + VISIBILITY_S * 1000}</NextVisibleTime>`;
  let inner = '';
  for (let k = 0; k < n; k++) {
    const m = state.fresh();
    const wire = Buffer.from(body(m.seq)).toString('base64'); // as the SDKs send: base64 bodies
    inner += `<Message><MessageId>${m.id}</MessageId><MessageBodyMD5>${md5Hex(wire).toUpperCase()}</MessageBodyMD5>` +
      `<MessageBody>${wire}</MessageBody>${tail}<ReceiptHandle>${m.handle}</ReceiptHandle>${visible}</Message>`;
  }
  ok(reply, 200, doc('Messages', inner));
}

function batchDelete(text, reply) {
  const failed = [];
  for (const [, handle] of text.matchAll(HANDLE)) {
    if (state.valid(handle)) state.counts.deleted++;
    else failed.push(handle);
  }
  if (!failed.length) {
    ok(reply, 204, '');
    return;
  }
  const inner = failed.map((h) => '<Error><ErrorCode>ReceiptHandleError</ErrorCode>' +
    `<ErrorMessage>The receipt handle you provide is not valid.</ErrorMessage><ReceiptHandle>${h}</ReceiptHandle></Error>`);
  ok(reply, 404, doc('Errors', inner.join('')));
}

function deleteOne(q, reply, host) {
  if (!state.valid(q.receipthandle)) {
    error(reply, 400, 'ReceiptHandleError', 'The receipt handle you provide is not valid.', host);
    return;
  }
  state.counts.deleted++;
  ok(reply, 204, '');
}

function changeVisibility(q, reply, host) {
  if (!state.valid(q.receipthandle)) {
    error(reply, 400, 'ReceiptHandleError', 'The receipt handle you provide is not valid.', host);
    return;
  }
  state.counts.visibility_changes++;
  const inner = `<ReceiptHandle>${state.renew(q.receipthandle)}</ReceiptHandle>` +
    `<NextVisibleTime>${Date.now() + Number(q.visibilitytimeout) * 1000}</NextVisibleTime>`;
  ok(reply, 200, doc('ChangeVisibility', inner));
}

function attributes(name, reply) {
  const left = state.opts.maxMessages ? state.opts.maxMessages - state.next : 1000000;
  const created = Math.floor(state.startedAt / 1000);
  const fields = {
    ActiveMessages: left, InactiveMessages: 0, DelayMessages: 0, CreateTime: created, LastModifyTime: created,
    QueueName: name, VisibilityTimeout: VISIBILITY_S, MaximumMessageSize: 65536, MessageRetentionPeriod: 345600,
    DelaySeconds: 0, PollingWaitSeconds: 0, LoggingEnabled: 'False',
  };
  ok(reply, 200, doc('Queue', Object.entries(fields).map(([k, v]) => `<${k}>${v}</${k}>`).join('')));
}

serve(state, (req, text, reply) => {
  const host = req.headers.host || '127.0.0.1';
  const parts = req.url.split('?')[0].split('/').filter(Boolean);
  if (parts[0] !== 'queues' || parts.length < 2 || parts.length > 3 || (parts[2] && parts[2] !== 'messages')) {
    error(reply, 400, 'InvalidRequestURL', 'Http request URL format invalid.', host);
    return;
  }
  if (!(req.headers.authorization || '').startsWith('MNS ')) {
    error(reply, 400, 'MissingAuthorizationHeader', 'Authorization header is required.', host);
    return;
  }
  const q = query(req.url);
  const onMessages = parts.length === 3;
  let op = null;
  if (!onMessages && req.method === 'GET') op = 'GetQueueAttributes';
  else if (onMessages && req.method === 'GET' && q.numofmessages && q.peekonly !== 'true') op = 'BatchReceiveMessage';
  else if (onMessages && req.method === 'DELETE') op = q.receipthandle ? 'DeleteMessage' : 'BatchDeleteMessage';
  else if (onMessages && req.method === 'PUT') op = 'ChangeMessageVisibility';
  if (op === null) {
    error(reply, 400, 'InvalidRequestURL', `not served here: ${req.method} ${req.url}`, host);
    return;
  }
  state.call(op);
  if (op === 'GetQueueAttributes') attributes(parts[1], reply);
  else if (op === 'BatchReceiveMessage') receive(q, reply, host);
  else if (op === 'BatchDeleteMessage') batchDelete(text, reply);
  else if (op === 'DeleteMessage') deleteOne(q, reply, host);
  else changeVisibility(q, reply, host);
});
