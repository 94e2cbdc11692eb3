// Mirrors apache/rocketmq-clients nodejs/test/producer/Producer.test.ts case by case (same names, same checks),
// against the npm package and our broker's gRPC endpoint (tests/compat/test_node5_suite.py starts it).
'use strict';

const { describe, it, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { NotFoundException, Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const { topics, endpoints, sessionCredentials, consumerGroup, namespace, jsonBody } = require('../helper');

describe('test/producer/Producer.test.ts', () => {
  let producer = null;
  let simpleConsumer = null;
  afterEach(async () => {
    if (producer) await producer.shutdown();
    if (simpleConsumer) await simpleConsumer.shutdown();
    producer = null;
    simpleConsumer = null;
  });

  function newProducer(extra) {
    return new Producer({ endpoints, namespace, sessionCredentials, maxAttempts: 2, ...extra });
  }

  function newConsumer(topic, tag) {
    return new SimpleConsumer({ consumerGroup, endpoints, namespace, sessionCredentials,
      subscriptions: new Map().set(topic, tag), awaitDuration: 3000 });
  }

  function keys() {
    return [ `foo-key-${Date.now()}`, `bar-key-${Date.now()}` ];
  }

  describe('startup()', () => {
    it('should startup success', async () => {
      producer = newProducer();
      await producer.startup();
      const receipt = await producer.send({ topic: topics.normal, tag: 'nodejs-unittest', keys: keys(),
        body: jsonBody() });
      assert.ok(receipt.offset >= 0);
      assert.equal(typeof receipt.messageId, 'string');
      assert.equal(receipt.messageId, receipt.transactionId);
    });

    it('should startup fail when topic not exists', async () => {
      await assert.rejects(async () => {
        producer = newProducer({ topic: 'TopicTest-not-exists' });
        await producer.startup();
      }, err => {
        // Upstream checks err.cause as the NotFoundException; since the client retries the route fetch at startup
        // (src/client/BaseClient.ts, in 1.0.8) the cause is "Failed to fetch topic routes after 3 attempts" and
        // the NotFoundException is its cause. Same checks, one level down.
        assert.match(err.message, /Startup the rocketmq client failed, clientId=[^,]+, error=/);
        const notFound = err.cause instanceof NotFoundException ? err.cause : err.cause.cause;
        assert.equal(notFound instanceof NotFoundException, true);
        assert.equal(notFound.name, 'NotFoundException');
        assert.equal(notFound.code, 40402);
        assert.match(notFound.message,
          /CODE: 17 {2}DESC: No topic route info in name server for the topic: TopicTest-not-exists/);
        return true;
      });
    });
  });

  describe('send()', () => {
    it('should send normal message', async () => {
      const topic = topics.normal;
      const tag = `nodejs-unittest-tag-${randomUUID()}`;
      producer = newProducer();
      await producer.startup();
      const receipt = await producer.send({ topic, tag, keys: keys(), body: jsonBody() });
      assert.ok(receipt.messageId);
      simpleConsumer = newConsumer(topic, tag);
      await simpleConsumer.startup();
      const messages = await simpleConsumer.receive(1, 10000);
      assert.equal(messages.length, 1);
      assert.equal(messages[0].messageId, receipt.messageId);
      await simpleConsumer.ack(messages[0]);
    });

    it('should send delay message', async () => {
      const topic = topics.delay;
      const tag = `nodejs-unittest-tag-${randomUUID()}`;
      producer = newProducer();
      await producer.startup();
      const startTime = Date.now();
      const receipt = await producer.send({ topic, tag, delay: 1000, keys: keys(), body: jsonBody() });
      assert.ok(receipt.messageId);
      simpleConsumer = newConsumer(topic, tag);
      await simpleConsumer.startup();
      const messages = await simpleConsumer.receive(1, 10000);
      assert.equal(messages.length, 1);
      const [ message ] = messages;
      assert.equal(message.messageId, receipt.messageId);
      assert.ok(message.transportDeliveryTimestamp);
      assert.ok(message.transportDeliveryTimestamp.getTime() - startTime >= 1000);
      await simpleConsumer.ack(message);
    });

    it('should send fifo message', async () => {
      const topic = topics.fifo;
      const tag = `nodejs-unittest-tag-${randomUUID()}`;
      producer = newProducer();
      await producer.startup();
      simpleConsumer = newConsumer(topic, tag);
      await simpleConsumer.startup();
      const fifo = hello => ({ topic, tag, body: jsonBody({ hello }), messageGroup: 'fifoMessageGroup' });

      // the first message is received and left unacked
      await producer.send(fifo('rocketmq-client-nodejs world \u{1F604}, first'));
      await simpleConsumer.receive(1, 10000);

      const receipt1 = await producer.send(fifo('rocketmq-client-nodejs world \u{1F604}, first'));
      assert.ok(receipt1.messageId);
      const receipt2 = await producer.send(fifo('rocketmq-client-nodejs world \u{1F604}, second'));
      assert.ok(receipt2.messageId);

      for (const [ receipt, hello ] of [[ receipt1, 'first' ], [ receipt2, 'second' ]]) {
        const messages = await simpleConsumer.receive(1, 10000);
        assert.equal(messages.length, 1);
        const [ message ] = messages;
        assert.equal(JSON.parse(message.body.toString()).hello, `rocketmq-client-nodejs world \u{1F604}, ${hello}`);
        assert.equal(message.messageId, receipt.messageId);
        assert.ok(message.messageGroup);
        assert.equal(message.messageGroup, 'fifoMessageGroup');
        assert.equal(message.properties.get('__SHARDINGKEY'), 'fifoMessageGroup');
        await simpleConsumer.ack(message);
      }
    });

    it('should send transaction message', async () => {
      const topic = topics.transaction;
      const tag = `nodejs-unittest-tag-${randomUUID()}`;
      producer = newProducer({ checker: { async check() { return TransactionResolution.COMMIT; } } });
      await producer.startup();
      const transaction = producer.beginTransaction();
      const receipt = await producer.send({ topic, tag, keys: keys(), body: jsonBody() }, transaction);
      await transaction.commit();
      simpleConsumer = newConsumer(topic, tag);
      await simpleConsumer.startup();
      const messages = await simpleConsumer.receive(2, 10000);
      assert.equal(messages.length, 1);
      const [ message ] = messages;
      assert.equal(message.messageId, receipt.messageId);
      assert.equal(message.properties.get('__transactionId__'), receipt.transactionId);
      await simpleConsumer.ack(message);
    });
  });
});
