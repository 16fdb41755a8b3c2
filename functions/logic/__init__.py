"""What the API does, knowing nothing of API Gateway: each function takes the store and plain
values or `tidemq_protocol.api` requests, and returns `tidemq_protocol.api` responses. What may give push delivery
work (a produce, a subscription change) is also given the `notifier.PushNotifier` to tell: the logic knows
nothing of how delivery is set going."""
