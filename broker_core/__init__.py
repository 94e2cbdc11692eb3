"""broker_core: a RocketMQ-style message broker in Python.

Packages: ``codec`` (every binary format, stdlib only), ``store`` (CommitLog, ConsumeQueue,
IndexFile, flush, recovery, retention, the ``MessageStore`` facade), ``tools`` (read-only
inspection). ``config`` loads RocketMQ-style ``broker.conf`` files.
"""

__version__ = "0.1.0"
