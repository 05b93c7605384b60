// An endless SQS endpoint for bench/intake.py: the JSON protocol boto3 1.44 speaks, every
// ReceiveMessage answered with fresh messages, every delete and visibility change accepted.
//
//   node bench/endless_sqs.js [--latency-ms N] [--max-messages N] [--port N]
//
// Prints the port first. GET /stats (or SIGTERM) reports the counts and this process's CPU per
// message received. The SigV4 Authorization header must be there; it is not verified.
'use strict';

const { Endless, body, md5Hex, parseOptions, serve } = require('./endless_server.js');

const state = new Endless(parseOptions(process.argv.slice(2)));
const JSON_TYPE = { 'Content-Type': 'application/x-amz-json-1.0' };
const MAX_WAIT_S = 20;
let port = 0;

function error(reply, status, code, message) {
  const headers = { ...JSON_TYPE, 'x-amzn-query-error': `${code};Sender` };
  reply(status, headers, JSON.stringify({ __type: `com.amazonaws.sqs#${code}`, message }));
}

function ok(reply, result, extraDelayMs = 0) {
  reply(200, { ...JSON_TYPE, 'x-amzn-RequestId': state.run }, JSON.stringify(result), extraDelayMs);
}

function receive(req, reply) {
  const wanted = Math.min(10, Math.max(1, req.MaxNumberOfMessages || 1));
  const n = state.take(wanted);
  if (n === 0) {
    // Nothing left (--max-messages): a long poll that finds nothing, as SQS answers it.
    ok(reply, {}, Math.min(MAX_WAIT_S, req.WaitTimeSeconds || 0) * 1000);
    return;
  }
  const withAttributes = (req.AttributeNames || []).length + (req.MessageSystemAttributeNames || []).length > 0;
  const now = String(Date.now());
  const messages = new Array(n);
  for (let k = 0; k < n; k++) {
    const m = state.fresh();
    const text = body(m.seq);
    messages[k] = { MessageId: m.id, ReceiptHandle: m.handle, MD5OfBody: md5Hex(text), Body: text };
    if (withAttributes) {
      messages[k].Attributes = {
        SenderId: 'AIDAENDLESS',
        SentTimestamp: now,
        ApproximateReceiveCount: '1',
        ApproximateFirstReceiveTimestamp: now,
      };
    }
  }
  ok(reply, { Messages: messages });
}

/** A *Batch call on handles: Successful for each valid one, ReceiptHandleIsInvalid for others. */
function batch(req, reply, counter) {
  const successful = [];
  const failed = [];
  for (const e of req.Entries || []) {
    if (state.valid(e.ReceiptHandle)) {
      successful.push({ Id: e.Id });
      state.counts[counter]++;
    } else {
      failed.push({ Id: e.Id, SenderFault: true, Code: 'ReceiptHandleIsInvalid', Message: 'invalid handle' });
    }
  }
  ok(reply, { Successful: successful, Failed: failed });
}

function single(req, reply, counter) {
  if (!state.valid(req.ReceiptHandle)) {
    error(reply, 400, 'ReceiptHandleIsInvalid', `The input receipt handle "${req.ReceiptHandle}" is not valid.`);
    return;
  }
  state.counts[counter]++;
  ok(reply, {});
}

function attributes(reply) {
  const left = state.opts.maxMessages ? state.opts.maxMessages - state.next : 1000000;
  ok(reply, {
    Attributes: {
      ApproximateNumberOfMessages: String(left),
      ApproximateNumberOfMessagesNotVisible: '0',
      ApproximateNumberOfMessagesDelayed: '0',
      VisibilityTimeout: '30',
    },
  });
}

const OPERATIONS = {
  ReceiveMessage: receive,
  DeleteMessageBatch: (req, reply) => batch(req, reply, 'deleted'),
  ChangeMessageVisibilityBatch: (req, reply) => batch(req, reply, 'visibility_changes'),
  DeleteMessage: (req, reply) => single(req, reply, 'deleted'),
  ChangeMessageVisibility: (req, reply) => single(req, reply, 'visibility_changes'),
  GetQueueUrl: (req, reply) => ok(reply, { QueueUrl: `http://127.0.0.1:${port}/000000000000/${req.QueueName}` }),
  GetQueueAttributes: (req, reply) => attributes(reply),
  SendMessageBatch: (req, reply) => {
    const entries = req.Entries || [];
    state.counts.sent += entries.length;
    const successful = entries.map((e) => ({
      Id: e.Id,
      MessageId: state.fresh().id,
      MD5OfMessageBody: md5Hex(e.MessageBody || ''),
    }));
    ok(reply, { Successful: successful, Failed: [] });
  },
};

const server = serve(state, (req, text, reply) => {
  const target = req.headers['x-amz-target'] || '';
  const op = target.startsWith('AmazonSQS.') ? target.slice('AmazonSQS.'.length) : '';
  if (req.method !== 'POST' || !OPERATIONS[op]) {
    error(reply, 400, 'UnsupportedOperation', `not served here: ${req.method} ${target || req.url}`);
    return;
  }
  if (!(req.headers.authorization || '').startsWith('AWS4-HMAC-SHA256 ')) {
    error(reply, 403, 'MissingAuthenticationToken', 'Request is missing Authentication Token');
    return;
  }
  let parsed;
  try {
    parsed = JSON.parse(text || '{}');
  } catch {
    error(reply, 400, 'MalformedQueryString', 'the body is not JSON');
    return;
  }
  state.call(op);
  OPERATIONS[op](parsed, reply);
});
server.on('listening', () => {
  port = server.address().port;
});
