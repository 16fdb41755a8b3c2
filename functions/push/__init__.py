"""Push delivery (RocketMQ's push consumer): new messages go to each push group's target without anybody polling.

`handler.py` is the push Lambda function (invoked asynchronously after a produce), `worker.py` its stand-in
inside the local gateway, `trigger.py` the process's notifier that sets either going (what the produce and
admin handlers give the logic), `subscribers.py` which groups push from which topic. The delivery itself is
`functions.logic.push` (one pass of a group) and `functions.logic.push_invocations` (a topic within one
invocation of the push function).
"""
