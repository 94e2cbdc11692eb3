// Mirrors apache/rocketmq-clients nodejs/test/consumer/SimpleConsumer.test.ts case by case (same names, same
// checks), against the npm package and our broker's gRPC endpoint (tests/compat/test_node5_suite.py starts it).
'use strict';

const { describe, it, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { SimpleConsumer, FilterExpression, Producer } = require('rocketmq-client-nodejs');
const { topics, endpoints, sessionCredentials, namespace } = require('../helper');

describe('test/consumer/SimpleConsumer.test.ts', () => {
  let producer = null;
  let simpleConsumer = null;
  afterEach(async () => {
    if (producer) await producer.shutdown();
    if (simpleConsumer) await simpleConsumer.shutdown();
    producer = null;
    simpleConsumer = null;
  });

  function delayConsumer(credentials) {
    return new SimpleConsumer({ endpoints, namespace, sessionCredentials: credentials,
      consumerGroup: 'nodejs-unittest-group', subscriptions: new Map().set(topics.delay, FilterExpression.SUB_ALL) });
  }

  describe('start with sessionCredentials', () => {
    it('should work', async () => {
      if (!sessionCredentials) return;
      simpleConsumer = delayConsumer(sessionCredentials);
      await simpleConsumer.startup();
    });

    it('should fail when accessKey invalid', async () => {
      if (!sessionCredentials) return;
      simpleConsumer = delayConsumer({ ...sessionCredentials, accessKey: 'wrong' });
      await assert.rejects(() => simpleConsumer.startup(),
        /Startup the rocketmq client failed, .+? error=ForbiddenException: .+? Username is not matched/);
    });

    it('should fail when accessSecret invalid', async () => {
      if (!sessionCredentials) return;
      simpleConsumer = delayConsumer({ ...sessionCredentials, accessSecret: 'wrong' });
      await assert.rejects(() => simpleConsumer.startup(),
        /Startup the rocketmq client failed, .+? error=ForbiddenException: .+? Check signature failed for accessKey/);
    });
  });

  describe('receive() and ack()', () => {
    it('should receive success', async () => {
      const topic = topics.normal;
      const tag = `nodejs-unittest-tag-${randomUUID()}`;
      producer = new Producer({ endpoints, namespace, sessionCredentials });
      await producer.startup();
      simpleConsumer = new SimpleConsumer({ endpoints, namespace, sessionCredentials,
        consumerGroup: `nodejs-unittest-group-${randomUUID()}`,
        subscriptions: new Map().set(topic, new FilterExpression(tag)) });
      await simpleConsumer.startup();
      const send = () => producer.send({ topic, tag, body: Buffer.from(JSON.stringify({ hello: 'world' })) });

      const first = await send();
      assert.ok(first.messageId);
      const messages = await simpleConsumer.receive(20, 10000);
      assert.equal(messages.length, 1);
      assert.equal(messages[0].messageId, first.messageId);

      const max = 102;
      for (let i = 0; i < max; i++) {
        assert.ok((await send()).messageId);
      }
      let count = 0;
      while (count < max) {
        for (const message of await simpleConsumer.receive(20, 10000)) {
          assert.equal(message.topic, topic);
          assert.deepEqual(JSON.parse(message.body.toString()), { hello: 'world' });
          assert.equal(message.tag, tag);
          count++;
          await simpleConsumer.ack(message);
        }
      }
      assert.equal(count, max);
    });
  });
});
