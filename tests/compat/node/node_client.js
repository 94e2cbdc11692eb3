'use strict';
// Drive ali-ons (the Node.js RocketMQ 4.x remoting client) for tests/compat/test_node_client.py.
// One JSON command in argv[2], one JSON result on the last stdout line:
//   {"op":"produce","namesrv","group","messages":[{"topic","body"(base64),"tags","keys":[...],"props":{}}]}
//     -> {"results":[{"status","msgId","queueId","queueOffset"}]}
//   {"op":"consume","namesrv","group","topic","expression","expect","timeout","retryOnce"}
//     -> {"messages":[{"msgId","topic","tags","keys","body"(base64),"props","reconsumeTimes","queueId"}]}
//   With retryOnce, each message (by UNIQ_KEY) is answered ACTION_RETRY the first time (sent back to the broker).
//   "deliveries" lists every call of the listener, "errors" what the consumer emitted.
//   {"op":"failover","namesrv","group","topic","stop_file","interval"} -> a producer (keys node-N, one send at a
//     time) and a consumer (group <group>-c) until stop_file exists, one JSON line per event as it happens:
//     {"sent":key,"t0","t"}, {"fail":text,"key","t0","t"}, {"got":key,"t"} (seconds), then {"done":true}.
const httpclient = require('urllib');
const { Producer, Consumer, Message } = require('ali-ons');

const cmd = JSON.parse(process.argv[2]);
const auth = { httpclient, accessKeyId: 'compat', accessKeySecret: 'compat', nameSrv: cmd.namesrv };
const sleep = ms => new Promise(r => setTimeout(r, ms));

async function produce() {
  const producer = new Producer({ ...auth, producerGroup: cmd.group });
  await producer.ready();
  const results = [];
  for (const m of cmd.messages) {
    const msg = new Message(m.topic, m.tags || '', Buffer.from(m.body, 'base64'));
    if (m.keys) msg.keys = m.keys;
    for (const [k, v] of Object.entries(m.props || {})) msg.properties[k] = v;
    const r = await producer.send(msg);
    results.push({ status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId, queueOffset: r.queueOffset });
  }
  await producer.close();
  return { results };
}

async function consume() {
  const consumer = new Consumer({ ...auth, consumerGroup: cmd.group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 1000 });
  const seen = new Set();
  const done = [];
  const deliveries = [];
  consumer.subscribe(cmd.topic, cmd.expression || '*', async msg => {
    deliveries.push({ msgId: msg.msgId, topic: msg.topic, reconsumeTimes: msg.reconsumeTimes });
    const id = (msg.properties && msg.properties.UNIQ_KEY) || msg.msgId; // ali-ons' msgId is the offset id
    if (cmd.retryOnce && !seen.has(id)) {
      seen.add(id);
      return Consumer.ACTION_RETRY;
    }
    done.push({ msgId: msg.msgId, topic: msg.topic, tags: msg.tags, keys: msg.keys, queueId: msg.queueId,
      body: msg.body.toString('base64'), props: msg.properties, reconsumeTimes: msg.reconsumeTimes });
  });
  const errors = [];
  consumer.on('error', e => errors.push(String(e && e.message))); // e.g. the retry topic's route before it exists
  await consumer.ready();
  const deadline = Date.now() + (cmd.timeout || 60) * 1000;
  while (done.length < cmd.expect && Date.now() < deadline) await sleep(100);
  await consumer.close();
  return { messages: done, deliveries, errors };
}

async function failover() {
  const fs = require('fs');
  const emit = e => process.stdout.write(JSON.stringify(e) + '\n');
  const now = () => Date.now() / 1000;
  const consumer = new Consumer({ ...auth, consumerGroup: cmd.group + '-c', consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 1000 });
  consumer.subscribe(cmd.topic, '*', async msg => {
    emit({ got: Array.isArray(msg.keys) ? msg.keys[0] : msg.keys, t: now() });
  });
  consumer.on('error', e => emit({ consumerError: String(e && e.message).slice(0, 300), t: now() }));
  const producer = new Producer({ ...auth, producerGroup: cmd.group });
  producer.on('error', e => emit({ producerError: String(e && e.message).slice(0, 300), t: now() }));
  await producer.ready();
  await consumer.ready();
  for (let i = 0; !fs.existsSync(cmd.stop_file); i++) {
    const key = `node-${i}`;
    const msg = new Message(cmd.topic, '', Buffer.from(key));
    msg.keys = [key];
    const t0 = now();
    try {
      const r = await producer.send(msg);
      if (r.sendStatus === 'SEND_OK') emit({ sent: key, t0, t: now() });
      else emit({ fail: r.sendStatus, key, t0, t: now() });
    } catch (e) {
      emit({ fail: String(e && e.message).slice(0, 300), key, t0, t: now() });
      await sleep(50);
    }
    await sleep((cmd.interval || 0.01) * 1000);
  }
  await producer.close();
  await consumer.close();
  return { done: true };
}

({ produce, consume, failover })[cmd.op]().then(r => {
  process.stdout.write(JSON.stringify(r) + '\n');
  process.exit(0);
}).catch(e => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
