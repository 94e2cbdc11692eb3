// Mirrors apache/rocketmq-clients nodejs/test/index.test.ts ('should export work'), against the npm package.
'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { SimpleConsumer, Producer } = require('rocketmq-client-nodejs');

describe('test/index.test.ts', () => {
  it('should export work', () => {
    for (const cls of [SimpleConsumer, Producer]) {
      assert.ok(cls);
      assert.equal(cls.prototype.clientId, undefined);
      assert.equal(typeof cls.prototype.startup, 'function');
    }
  });
});
