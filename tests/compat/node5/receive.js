// Test-only driver: the RocketMQ 5 Node.js client (npm rocketmq-client-nodejs, pinned in package-lock.json)
// receives from a broker's gRPC endpoint with a SimpleConsumer, for tests/compat/test_body_digest.py.
// One JSON command in argv[2]: {endpoint, group, topic, expect, within (s)}; one JSON line on stdout:
// {messages: [{id, body (base64), corrupted, attempt}]}; every message received is acked.
'use strict';

const { SimpleConsumer } = require('rocketmq-client-nodejs');

async function main() {
  const cmd = JSON.parse(process.argv[2]);
  const consumer = new SimpleConsumer({
    endpoints: cmd.endpoint,
    consumerGroup: cmd.group,
    subscriptions: new Map().set(cmd.topic, '*'),
    awaitDuration: 2000,
  });
  await consumer.startup();
  const messages = [];
  const deadline = Date.now() + (cmd.within || 60) * 1000;
  try {
    while (messages.length < cmd.expect && Date.now() < deadline) {
      for (const m of await consumer.receive(16, 30000)) {
        messages.push({ id: m.messageId, body: m.body.toString('base64'), corrupted: m.corrupted === true,
          attempt: m.deliveryAttempt });
        await consumer.ack(m);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  process.stdout.write(JSON.stringify({ messages }) + '\n');
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
});
