// Settings of the RocketMQ 5 Node.js client's own integration tests (apache/rocketmq-clients nodejs/test/helper.ts):
// the same environment variables and topic names, read the same way. Written here, not copied: that suite is
// only on GitHub (the npm package ships no tests), and CI cannot reach GitHub.
'use strict';

const endpoints = process.env.ROCKETMQ_NODEJS_CLIENT_ENDPOINTS || 'localhost:8081';
const namespace = process.env.ROCKETMQ_NODEJS_CLIENT_NAMESPACE || '';
const consumerGroup = process.env.ROCKETMQ_NODEJS_CLIENT_GROUP || 'nodejs-unittest-group';
const topics = {
  normal: 'TopicTestForNormal',
  fifo: 'TopicTestForFifo',
  delay: 'TopicTestForDelay',
  transaction: 'TopicTestForTransaction',
};
const key = process.env.ROCKETMQ_NODEJS_CLIENT_KEY;
const secret = process.env.ROCKETMQ_NODEJS_CLIENT_SECRET;
const sessionCredentials = key && secret ? { accessKey: key, accessSecret: secret } : undefined;

function jsonBody(extra) {
  return Buffer.from(JSON.stringify({ hello: 'rocketmq-client-nodejs world \u{1F604}', now: Date(), ...extra }));
}

module.exports = { endpoints, namespace, consumerGroup, topics, sessionCredentials, jsonBody };
