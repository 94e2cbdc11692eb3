"""RocketMQ 5 gRPC (``apache.rocketmq.v2.MessagingService``) served by the broker itself, so the official
RocketMQ 5 clients work unchanged: routes (route.py), sends and transactions (send.py), timed delivery
(timer.py), receive/ack over the broker's PopService (receive.py), Telemetry (telemetry.py), protobuf <-> record
(convert.py), the servicer (service.py) and the grpc.aio server (server.py). Stubs: stubs.py."""
